// safetensors_format.cpp: parsing and validating a safetensors header (length, JSON, entries,
// layout of the data section) and writing one. No tensor memory is touched here.
#include "io/safetensors_format.hpp"

#include <algorithm>
#include <limits>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace ampgrad::io {

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& fact) {
    throw FormatError(fmt::format("safetensors: {}: {}", source, fact));
}

// A header nests at most 3 levels (root object > entry object > shape array), and no array it
// holds needs more than kMaxRank elements. Enforcing both while parsing keeps the JSON tree
// small, and repeated keys (which nlohmann would silently overwrite) are caught here too.
constexpr int kMaxDepth = 3;
constexpr size_t kMaxRank = 64;

struct Frame {
    bool is_array = false;
    size_t count = 0;
    std::vector<std::string> keys;
};

json parse_guarded(std::string_view text, const std::string& source) {
    std::vector<Frame> open;
    auto guard = [&](int, json::parse_event_t event, json& parsed) -> bool {
        using E = json::parse_event_t;
        if (event == E::object_start || event == E::array_start) {
            if (!open.empty() && open.back().is_array && ++open.back().count > kMaxRank)
                fail(source, fmt::format("the header has an array longer than {} elements", kMaxRank));
            if (open.size() >= static_cast<size_t>(kMaxDepth))
                fail(source, fmt::format("the header nests deeper than {} levels", kMaxDepth));
            open.push_back(Frame{event == E::array_start, 0, {}});
        } else if (event == E::object_end || event == E::array_end) {
            if (!open.empty()) open.pop_back();
        } else if (event == E::key) {
            std::string key = parsed.get<std::string>();
            auto& keys = open.back().keys;
            if (std::find(keys.begin(), keys.end(), key) != keys.end())
                fail(source, fmt::format("the key \"{}\" appears twice in one object of the header", key));
            keys.push_back(std::move(key));
        } else if (event == E::value && !open.empty() && open.back().is_array && ++open.back().count > kMaxRank) {
            fail(source, fmt::format("the header has an array longer than {} elements", kMaxRank));
        }
        return true;
    };
    try {
        return json::parse(text.data(), text.data() + text.size(), guard);
    } catch (const json::exception& e) {
        fail(source, fmt::format("the header is not valid JSON ({})", e.what()));
    }
}

// a * b, or nullopt when it exceeds int64.
std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r) || r > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        return std::nullopt;
    return r;
}

const json& field(const json& entry, const char* key, const std::string& name, const std::string& source) {
    auto it = entry.find(key);
    if (it == entry.end()) fail(source, fmt::format("tensor \"{}\" has no \"{}\"", name, key));
    return *it;
}

uint64_t parse_count(const json& v, const std::string& what, const std::string& source) {
    if (!v.is_number_unsigned() || v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
        fail(source, fmt::format("{} must be a non-negative integer below 2^63, not {}", what, v.dump()));
    return v.get<uint64_t>();
}

TensorEntry parse_entry(const std::string& name, const json& v, uint64_t data_bytes, const std::string& source) {
    if (!v.is_object())
        fail(source, fmt::format("tensor \"{}\" must map to an object with dtype, shape and data_offsets", name));
    TensorEntry e;
    e.name = name;
    const json& dtype = field(v, "dtype", name, source);
    if (!dtype.is_string()) fail(source, fmt::format("tensor \"{}\" has a dtype that is not a string", name));
    e.dtype = dtype.get<std::string>();
    std::optional<uint64_t> elem = safetensors_dtype_size(e.dtype);
    if (!elem)
        fail(source, fmt::format("tensor \"{}\" has dtype \"{}\"; ampgrad reads F64, F32, F16, BF16, I64, I32 and BOOL",
                                 name, e.dtype));
    const json& shape = field(v, "shape", name, source);
    if (!shape.is_array()) fail(source, fmt::format("tensor \"{}\" has a shape that is not an array", name));
    uint64_t numel = 1;
    for (const json& d : shape) {
        uint64_t size = parse_count(d, fmt::format("each dimension of tensor \"{}\"", name), source);
        std::optional<uint64_t> next = checked_mul(numel, size);
        if (!next) fail(source, fmt::format("tensor \"{}\" has shape {} with more than 2^63 elements", name, shape.dump()));
        numel = *next;
        e.shape.push_back(static_cast<int64_t>(size));
    }
    const json& offsets = field(v, "data_offsets", name, source);
    if (!offsets.is_array() || offsets.size() != 2)
        fail(source, fmt::format("tensor \"{}\" must have data_offsets [begin, end], not {}", name, offsets.dump()));
    e.begin = parse_count(offsets[0], fmt::format("data_offsets of tensor \"{}\"", name), source);
    e.end = parse_count(offsets[1], fmt::format("data_offsets of tensor \"{}\"", name), source);
    if (e.begin > e.end || e.end > data_bytes)
        fail(source, fmt::format("tensor \"{}\" has data_offsets [{}, {}], outside the {}-byte data section", name,
                                 e.begin, e.end, data_bytes));
    std::optional<uint64_t> nbytes = checked_mul(numel, *elem);
    if (!nbytes || *nbytes != e.end - e.begin)
        fail(source, fmt::format("tensor \"{}\" has data_offsets [{}, {}] ({} bytes) but shape {} of {} needs {} bytes",
                                 name, e.begin, e.end, e.end - e.begin, shape.dump(), e.dtype,
                                 nbytes ? fmt::to_string(*nbytes) : std::string("more than 2^63")));
    return e;
}

std::map<std::string, std::string> parse_metadata(const json& v, const std::string& source) {
    if (!v.is_object()) fail(source, "__metadata__ must be an object of strings");
    std::map<std::string, std::string> out;
    for (const auto& [key, value] : v.items()) {
        if (!value.is_string()) fail(source, fmt::format("__metadata__ value of \"{}\" is not a string", key));
        out[key] = value.get<std::string>();
    }
    return out;
}

// The ranges must tile [0, data_bytes) exactly: no overlap and, as the format asks, no hole.
void check_layout(std::vector<TensorEntry>& tensors, uint64_t data_bytes, const std::string& source) {
    std::sort(tensors.begin(), tensors.end(), [](const TensorEntry& a, const TensorEntry& b) {
        return a.begin != b.begin ? a.begin < b.begin : (a.end != b.end ? a.end < b.end : a.name < b.name);
    });
    uint64_t covered = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const TensorEntry& t = tensors[i];
        if (t.begin < covered)
            fail(source, fmt::format("tensors \"{}\" [{}, {}] and \"{}\" [{}, {}] overlap", tensors[i - 1].name,
                                     tensors[i - 1].begin, tensors[i - 1].end, t.name, t.begin, t.end));
        if (t.begin > covered)
            fail(source, fmt::format("bytes [{}, {}) of the data section belong to no tensor", covered, t.begin));
        covered = t.end;
    }
    if (covered != data_bytes)
        fail(source, fmt::format("the data section is {} bytes but its tensors cover {}", data_bytes, covered));
}

}  // namespace

std::optional<uint64_t> safetensors_dtype_size(std::string_view dtype) {
    if (dtype == "F64" || dtype == "I64") return 8;
    if (dtype == "F32" || dtype == "I32") return 4;
    if (dtype == "F16" || dtype == "BF16") return 2;
    if (dtype == "BOOL" || dtype == "U8" || dtype == "F8_E4M3" || dtype == "F8_E5M2") return 1;
    return std::nullopt;
}

uint64_t parse_header_length(const unsigned char* first8, uint64_t file_bytes, const std::string& source) {
    if (file_bytes < 8) fail(source, fmt::format("the file is {} bytes, too short for the 8-byte header length", file_bytes));
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= static_cast<uint64_t>(first8[i]) << (8 * i);
    if (n > kMaxHeaderBytes)
        fail(source, fmt::format("the header length {} is over the limit of {} bytes", n, kMaxHeaderBytes));
    if (n > file_bytes - 8)
        fail(source, fmt::format("the header length {} does not fit the file ({} bytes after the length)", n,
                                 file_bytes - 8));
    return n;
}

Header parse_header(std::string_view text, uint64_t data_bytes, const std::string& source) {
    if (text.empty() || text.front() != '{') fail(source, "the header must be a JSON object starting with '{'");
    json doc = parse_guarded(text, source);
    if (!doc.is_object()) fail(source, "the header is not a JSON object");
    Header h;
    h.header_bytes = text.size();
    h.data_bytes = data_bytes;
    for (const auto& [key, value] : doc.items()) {
        if (key == "__metadata__") h.metadata = parse_metadata(value, source);
        else h.tensors.push_back(parse_entry(key, value, data_bytes, source));
    }
    check_layout(h.tensors, data_bytes, source);
    return h;
}

Header parse_safetensors(const unsigned char* bytes, uint64_t size, const std::string& source) {
    uint64_t n = parse_header_length(bytes, size, source);
    std::string_view text(reinterpret_cast<const char*>(bytes) + 8, n);
    return parse_header(text, size - 8 - n, source);
}

std::string serialize_header(const std::vector<TensorEntry>& tensors,
                             const std::map<std::string, std::string>& metadata) {
    nlohmann::ordered_json doc = nlohmann::ordered_json::object();
    if (!metadata.empty()) doc["__metadata__"] = metadata;
    for (const TensorEntry& t : tensors)
        doc[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
    std::string text;
    try {
        text = doc.dump();
    } catch (const nlohmann::json::exception& e) {
        throw ValueError(fmt::format("safetensors: a tensor name or metadata string is not valid UTF-8 ({})", e.what()));
    }
    text.append((8 - (8 + text.size()) % 8) % 8, ' ');
    return text;
}

}  // namespace ampgrad::io
