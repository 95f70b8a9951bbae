// safetensors.cpp: tensors <-> safetensors files: the writer (through core/atomic_file.hpp: temp
// file, fsync, rename, fsync of the directory), the reader (validated header first, then one
// allocation and one read per tensor), tied-weight records, and the Module helpers.
#include "io/safetensors.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstring>

#include <nlohmann/json.hpp>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/atomic_file.hpp"
#include "core/profiler.hpp"
#include "core/error.hpp"

namespace ampgrad::io {

// Tensor bytes are copied to and from the file as they lie in memory; the format stores them
// little-endian, so a big-endian host would need a byte swap here.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

[[noreturn]] void io_fail(const char* op, const std::string& path, const std::string& fact) {
    throw IOError(fmt::format("{}: {}: {}", op, path, fact));
}
std::string errno_text() { return std::strerror(errno); }

struct Fd {
    int fd = -1;
    explicit Fd(int f) : fd(f) {}
    ~Fd() { if (fd >= 0) ::close(fd); }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
};

std::string_view safetensors_dtype(DType d) {
    switch (d) {
        case kFloat64: return "F64";
        case kFloat32: return "F32";
        case kFloat16: return "F16";
        case kBFloat16: return "BF16";
        case kInt64: return "I64";
        case kInt32: return "I32";
        case kBool: return "BOOL";
        case kFloat8_e4m3fn: return "F8_E4M3";
        case kFloat8_e5m2: return "F8_E5M2";
        case kUInt8: return "U8";
    }
    throw InternalError("safetensors_dtype: unknown DType");
}

DType ampgrad_dtype(const std::string& s) {
    for (DType d : {kFloat64, kFloat32, kFloat16, kBFloat16, kInt64, kInt32, kBool, kFloat8_e4m3fn, kFloat8_e5m2, kUInt8})
        if (safetensors_dtype(d) == s) return d;
    throw InternalError(fmt::format("ampgrad_dtype: \"{}\" passed validation but has no DType", s));
}

// ---- reading ----

void read_exact(int fd, void* buf, uint64_t n, uint64_t offset, const std::string& path) {
    auto* p = static_cast<char*>(buf);
    while (n > 0) {
        ssize_t r = ::pread(fd, p, std::min<uint64_t>(n, uint64_t{1} << 30), static_cast<off_t>(offset));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) io_fail("load_safetensors", path, "read failed: " + errno_text());
        if (r == 0) throw FormatError(fmt::format("safetensors: {}: the file ended early (was it changed while being "
                                                  "read?)", path));
        p += r;
        n -= static_cast<uint64_t>(r);
        offset += static_cast<uint64_t>(r);
    }
}

// Opens `path` for reading and returns the descriptor and the file size.
std::pair<std::unique_ptr<Fd>, uint64_t> open_for_read(const std::string& path) {
    auto fd = std::make_unique<Fd>(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd->fd < 0) io_fail("load_safetensors", path, "cannot open: " + errno_text());
    struct stat st {};
    if (::fstat(fd->fd, &st) != 0) io_fail("load_safetensors", path, "cannot stat: " + errno_text());
    if (!S_ISREG(st.st_mode)) io_fail("load_safetensors", path, "not a regular file");
    return {std::move(fd), static_cast<uint64_t>(st.st_size)};
}

Header read_header(int fd, uint64_t size, const std::string& path) {
    unsigned char first8[8] = {};
    read_exact(fd, first8, std::min<uint64_t>(size, 8), 0, path);
    uint64_t n = parse_header_length(first8, size, path);      // checked against the file size
    std::string text(n, '\0');
    read_exact(fd, text.data(), n, 8, path);
    return parse_header(text, size - 8 - n, path);
}

// The "ampgrad.tied" record: a JSON object {alias: stored name}; removed from `metadata`.
std::map<std::string, std::string> take_tied(Metadata& metadata, const Header& h, const std::string& path) {
    std::map<std::string, std::string> tied;
    auto it = metadata.find(kTiedMetadataKey);
    if (it == metadata.end()) return tied;
    auto bad = [&](const std::string& fact) {
        throw FormatError(fmt::format("safetensors: {}: __metadata__[\"{}\"] {}", path, kTiedMetadataKey, fact));
    };
    nlohmann::json doc = nlohmann::json::parse(it->second, nullptr, /*allow_exceptions=*/false);
    if (!doc.is_object()) bad("is not a JSON object of names");
    auto stored = [&](const std::string& name) {
        return std::any_of(h.tensors.begin(), h.tensors.end(), [&](const TensorEntry& e) { return e.name == name; });
    };
    for (const auto& [alias, target] : doc.items()) {
        if (!target.is_string()) bad(fmt::format("maps \"{}\" to a non-string", alias));
        std::string t = target.get<std::string>();
        if (!stored(t)) bad(fmt::format("ties \"{}\" to \"{}\", which is not a tensor in the file", alias, t));
        if (stored(alias) || alias == "__metadata__")
            bad(fmt::format("ties \"{}\", which is already a tensor name", alias));
        tied[alias] = t;
    }
    metadata.erase(it);
    return tied;
}

Tensor read_tensor(int fd, const Header& h, const TensorEntry& e, const std::string& path) {
    Tensor t = make_empty(Shape(e.shape.begin(), e.shape.end()), ampgrad_dtype(e.dtype), Device(kCPU));
    uint64_t nbytes = e.end - e.begin;
    if (nbytes > 0) read_exact(fd, t.raw_data(), nbytes, h.data_start() + e.begin, path);
    if (t.dtype() == kBool) {
        const auto* bytes = static_cast<const unsigned char*>(t.raw_data());
        for (uint64_t i = 0; i < nbytes; ++i)
            if (bytes[i] > 1)
                throw FormatError(fmt::format("safetensors: {}: BOOL tensor \"{}\" holds byte {} at element {} (only 0 "
                                              "and 1 are booleans)", path, e.name, bytes[i], i));
    }
    return t;
}

// ---- writing ----

bool same_view(const Tensor& a, const Tensor& b) {
    const TensorImpl *x = a.impl(), *y = b.impl();
    return x->storage && x->storage == y->storage && x->offset == y->offset && x->sizes == y->sizes &&
           x->strides == y->strides && x->dtype == y->dtype;
}

}  // namespace

void save_safetensors(const std::string& path, const nn::NamedTensors& tensors, const Metadata& metadata) {
    profiler::Span span("checkpoint", "save_safetensors", [&] { return "{\"path\": " + profiler::json_string(path) + "}"; });
    if (metadata.count(kTiedMetadataKey))
        throw ValueError(fmt::format("save_safetensors: {}: the metadata key \"{}\" is reserved for tied weights", path,
                                     kTiedMetadataKey));
    std::vector<TensorEntry> entries;
    std::vector<Tensor> sources;                     // entries[i]'s tensor
    std::map<std::string, std::string> tied;
    uint64_t offset = 0;
    for (const auto& [name, t] : tensors) {
        if (!t.defined()) throw ValueError(fmt::format("save_safetensors: {}: tensor \"{}\" is undefined", path, name));
        if (name == "__metadata__")
            throw ValueError(fmt::format("save_safetensors: {}: \"__metadata__\" cannot name a tensor", path));
        auto same = std::find_if(sources.begin(), sources.end(), [&](const Tensor& s) { return same_view(s, t); });
        if (same != sources.end()) {
            tied[name] = entries[static_cast<size_t>(same - sources.begin())].name;
            continue;
        }
        uint64_t nbytes = static_cast<uint64_t>(t.numel()) * t.element_size();
        entries.push_back(TensorEntry{name, std::string(safetensors_dtype(t.dtype())), t.sizes(), offset, offset + nbytes});
        sources.push_back(t);
        offset += nbytes;
    }
    Metadata meta = metadata;
    if (!tied.empty()) meta[kTiedMetadataKey] = nlohmann::json(tied).dump();
    std::string header = serialize_header(entries, meta);
    auto write_contents = [&](int fd) {
        unsigned char len[8];
        for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(static_cast<uint64_t>(header.size()) >> (8 * i));
        write_all(fd, len, 8, path);
        write_all(fd, header.data(), header.size(), path);
        NoGradGuard no_grad;
        for (size_t i = 0; i < entries.size(); ++i) {   // one host copy at a time
            Tensor host = sources[i].detach().to(Device(kCPU)).contiguous();
            if (entries[i].end > entries[i].begin) write_all(fd, host.raw_data(), entries[i].end - entries[i].begin, path);
        }
    };
    try {
        ampgrad::write_file_atomic(path, write_contents);
    } catch (const IOError& e) {
        throw IOError(fmt::format("save_safetensors: {}", e.what()));
    }
}

void write_file_atomic(const std::string& path, const std::string& bytes) { ampgrad::write_file_atomic(path, bytes); }

Header read_safetensors_header(const std::string& path) {
    auto [fd, size] = open_for_read(path);
    return read_header(fd->fd, size, path);
}

SafetensorsFile load_safetensors(const std::string& path, Device device) {
    auto [fd, size] = open_for_read(path);
    Header h = read_header(fd->fd, size, path);
    SafetensorsFile out;
    out.metadata = h.metadata;
    out.tied = take_tied(out.metadata, h, path);
    NoGradGuard no_grad;
    for (const TensorEntry& e : h.tensors) {
        Tensor t = read_tensor(fd->fd, h, e, path);
        if (device != t.device()) t = t.to(device);
        out.tensors.insert(e.name, t);
        for (const auto& [alias, target] : out.tied)
            if (target == e.name) out.tensors.insert(alias, t);
    }
    return out;
}

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
    auto [fd, size] = open_for_read(path);
    header_ = read_header(fd->fd, size, path);
    fd_ = fd->fd;
    fd->fd = -1;   // this reader closes it
}

SafetensorsReader::~SafetensorsReader() {
    if (fd_ >= 0) ::close(fd_);
}

const TensorEntry* SafetensorsReader::find(const std::string& name) const {
    for (const TensorEntry& e : header_.tensors)
        if (e.name == name) return &e;
    return nullptr;
}

Tensor SafetensorsReader::read(const std::string& name) const {
    const TensorEntry* e = find(name);
    if (e == nullptr) throw ValueError(fmt::format("SafetensorsReader: {}: no tensor \"{}\" in the file", path_, name));
    NoGradGuard no_grad;
    return read_tensor(fd_, header_, *e, path_);
}

void save_state_dict(const nn::Module& module, const std::string& path, const Metadata& metadata) {
    save_safetensors(path, module.state_dict(), metadata);
}

// Checks names and shapes from the header alone (Module::check_state_shapes: load_state_dict's
// errors), then reads each tensor's bytes straight into its parameter or buffer where the dtype
// matches and it is a contiguous CPU tensor: no second copy of the model in memory (deferred
// initialisation, nn/init.hpp). Other tensors (another dtype or device) go through a read and a copy.
void load_state_dict(nn::Module& module, const std::string& path, bool strict) {
    auto [fd, size] = open_for_read(path);
    Header h = read_header(fd->fd, size, path);
    Metadata metadata = h.metadata;
    const std::map<std::string, std::string> tied = take_tied(metadata, h, path);   // alias -> stored name
    std::map<std::string, const TensorEntry*> entries;
    for (const TensorEntry& e : h.tensors) entries[e.name] = &e;
    for (const auto& [alias, target] : tied) entries[alias] = entries.at(target);
    std::map<std::string, Shape> shapes;
    for (const auto& [name, e] : entries) shapes[name] = Shape(e->shape.begin(), e->shape.end());
    module.check_state_shapes(shapes, strict);
    NoGradGuard no_grad;
    std::vector<const void*> done;                     // a tied tensor (two keys, one memory) is read once
    for (const auto& [key, t] : module.state_dict()) {
        auto found = entries.find(key);
        if (found == entries.end() || std::find(done.begin(), done.end(), t.raw_data()) != done.end()) continue;
        done.push_back(t.raw_data());
        const TensorEntry& e = *found->second;
        const uint64_t nbytes = e.end - e.begin;
        if (t.device().is_cpu() && t.is_contiguous() && t.dtype() == ampgrad_dtype(e.dtype) && t.dtype() != kBool) {
            if (nbytes > 0) read_exact(fd->fd, t.raw_data(), nbytes, h.data_start() + e.begin, path);
            t.bump_version();
        } else {
            Tensor dst = t;
            copy_(dst, read_tensor(fd->fd, h, e, path));
        }
    }
}

}  // namespace ampgrad::io
