// hellaswag.cpp: HellaSwag's jsonl layout read line by line with nlohmann-json, and an example
// rendered to the (4,T) token ids and ending mask the scorer reads (data/hellaswag.hpp).
#include "data/hellaswag.hpp"

#include <algorithm>
#include <cctype>

#include <nlohmann/json.hpp>

#include "data/text.hpp"

namespace ampgrad::data {

HellaswagFormatError::HellaswagFormatError(const std::string& file, int64_t line, const std::string& problem)
    : FormatError(fmt::format("{}:{}: {}", file, line, problem)), file(file), line(line) {}

namespace {

const char* json_kind(const nlohmann::json& v) { return v.type_name(); }

// The string field `key` of the object j (HellaswagFormatError when absent or not a string).
std::string string_field(const nlohmann::json& j, const char* key, const std::string& file, int64_t line) {
    if (!j.contains(key)) throw HellaswagFormatError(file, line, fmt::format("the field \"{}\" is missing", key));
    const nlohmann::json& v = j.at(key);
    if (!v.is_string())
        throw HellaswagFormatError(file, line, fmt::format("the field \"{}\" must be a string, not {}", key, json_kind(v)));
    return v.get<std::string>();
}

// label: an integer 0..3 (the Hugging Face copy of the data set writes it as a string, "0".."3": taken too).
int label_field(const nlohmann::json& j, const std::string& file, int64_t line) {
    if (!j.contains("label"))
        throw HellaswagFormatError(file, line, "the field \"label\" is missing (the test split has no labels: use the "
                                               "val split, hellaswag_val.jsonl)");
    const nlohmann::json& v = j.at("label");
    int64_t label = -1;
    if (v.is_number_integer()) {
        label = v.get<int64_t>();
    } else if (const std::string* s = v.get_ptr<const std::string*>();
               s != nullptr && s->size() == 1 && std::isdigit(static_cast<unsigned char>((*s)[0]))) {
        label = (*s)[0] - '0';
    } else {
        throw HellaswagFormatError(file, line, fmt::format("the field \"label\" must be an integer 0..3, not {} {}",
                                                           json_kind(v), v.dump()));
    }
    if (label < 0 || label >= kHellaswagEndings)
        throw HellaswagFormatError(file, line, fmt::format("the field \"label\" is {}, outside 0..3", label));
    return static_cast<int>(label);
}

std::array<std::string, kHellaswagEndings> endings_field(const nlohmann::json& j, const std::string& file, int64_t line) {
    if (!j.contains("endings")) throw HellaswagFormatError(file, line, "the field \"endings\" is missing");
    const nlohmann::json& v = j.at("endings");
    if (!v.is_array())
        throw HellaswagFormatError(file, line, fmt::format("the field \"endings\" must be an array of 4 strings, not {}",
                                                           json_kind(v)));
    if (v.size() != kHellaswagEndings)
        throw HellaswagFormatError(file, line, fmt::format("the field \"endings\" has {} entries; HellaSwag's layout has "
                                                           "exactly 4", v.size()));
    std::array<std::string, kHellaswagEndings> out;
    for (size_t i = 0; i < out.size(); ++i) {
        if (!v[i].is_string())
            throw HellaswagFormatError(file, line, fmt::format("endings[{}] must be a string, not {}", i, json_kind(v[i])));
        out[i] = v[i].get<std::string>();
    }
    return out;
}

HellaswagExample parse_line(std::string_view text, const std::string& file, int64_t line) {
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        throw HellaswagFormatError(file, line, fmt::format("not a JSON object: {}", e.what()));
    }
    if (!j.is_object())
        throw HellaswagFormatError(file, line, fmt::format("not a JSON object but {}", json_kind(j)));
    HellaswagExample ex;
    ex.line = line;
    ex.ctx = string_field(j, "ctx", file, line);
    if (ex.ctx.empty())
        throw HellaswagFormatError(file, line, "the field \"ctx\" is empty (an ending's first token needs a context "
                                               "to be predicted from)");
    ex.endings = endings_field(j, file, line);
    ex.label = label_field(j, file, line);
    return ex;
}

bool blank(std::string_view s) {
    return std::all_of(s.begin(), s.end(), [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; });
}

}  // namespace

std::vector<HellaswagExample> parse_hellaswag(std::string_view text, const std::string& file) {
    std::vector<HellaswagExample> out;
    int64_t line = 0;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        std::string_view row = text.substr(pos, end - pos);
        ++line;
        if (!blank(row)) out.push_back(parse_line(row, file, line));
        pos = end + 1;
    }
    return out;
}

std::vector<HellaswagExample> read_hellaswag(const std::string& path) {
    std::vector<HellaswagExample> out = parse_hellaswag(read_text_file(path), path);
    if (out.empty()) throw FormatError(fmt::format("hellaswag {}: holds no examples (only blank lines)", path));
    return out;
}

HellaswagBatch render_hellaswag(const HellaswagExample& ex, const Tokenizer& tok, int64_t max_tokens) {
    if (max_tokens < 2)
        throw ValueError(fmt::format("hellaswag: a context of {} tokens cannot score an ending (at least 2)", max_tokens));
    HellaswagBatch b;
    b.label = ex.label;
    b.line = ex.line;
    std::array<std::vector<int32_t>, kHellaswagEndings> rows;
    std::array<size_t, kHellaswagEndings> ending_start{};   // where each row's ending begins
    try {
        const std::vector<int32_t> ctx = tok.encode(ex.ctx);
        for (int i = 0; i < kHellaswagEndings; ++i) {
            const std::vector<int32_t> end = tok.encode(" " + ex.endings[static_cast<size_t>(i)]);
            std::vector<int32_t>& row = rows[static_cast<size_t>(i)];
            row = ctx;
            row.insert(row.end(), end.begin(), end.end());
            ending_start[static_cast<size_t>(i)] = ctx.size();
            b.ending_chars[static_cast<size_t>(i)] =
                static_cast<int64_t>(utf8_code_points(ex.endings[static_cast<size_t>(i)]).size());
        }
    } catch (const ValueError& e) {
        throw ValueError(fmt::format("hellaswag example at line {}: {}", ex.line, e.what()));
    }
    for (size_t i = 0; i < rows.size(); ++i) {   // left truncation: keep the last max_tokens tokens
        const int64_t n = static_cast<int64_t>(rows[i].size());
        b.truncated[i] = std::max<int64_t>(0, n - max_tokens);
        b.lengths[i] = n - b.truncated[i];
        b.T = std::max(b.T, b.lengths[i]);
    }
    b.ids.assign(static_cast<size_t>(kHellaswagEndings * b.T), 0);
    b.mask.assign(b.ids.size(), 0);
    for (size_t i = 0; i < rows.size(); ++i) {
        const int64_t drop = b.truncated[i];
        for (int64_t t = 0; t < b.lengths[i]; ++t) {
            const size_t src = static_cast<size_t>(t + drop), dst = i * static_cast<size_t>(b.T) + static_cast<size_t>(t);
            b.ids[dst] = rows[i][src];
            b.mask[dst] = src >= ending_start[i] ? 1 : 0;
        }
    }
    return b;
}

}  // namespace ampgrad::data
