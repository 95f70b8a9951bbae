// zero/checkpoint_files.cpp: checksums, the manifest's checks and range reads across rank files
// (zero/checkpoint_files.hpp). Every failure is a CheckpointError that names the file and the fact.
#include "zero/checkpoint_files.hpp"

#include "autograd/ops/ops.hpp"
#include "io/safetensors.hpp"
#include "zero/checkpoint.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace ampgrad::zero {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& path, const std::string& fact) {
    throw CheckpointError(fmt::format("ZeRO checkpoint {}: {}", path, fact));
}

DType dtype_of(const std::string& s, const std::string& path) {
    for (DType d : {kFloat64, kFloat32, kFloat16, kBFloat16, kInt64, kInt32})
        if ((d == kFloat64 && s == "F64") || (d == kFloat32 && s == "F32") || (d == kFloat16 && s == "F16") ||
            (d == kBFloat16 && s == "BF16") || (d == kInt64 && s == "I64") || (d == kInt32 && s == "I32"))
            return d;
    fail(path, fmt::format("unexpected dtype {}", s));
}

const io::TensorEntry* find_entry(const detail::RankFile& f, const std::string& name) {
    for (const io::TensorEntry& e : f.header.tensors)
        if (e.name == name) return &e;
    return nullptr;
}

// pread exactly n bytes at `offset` of `path` into buf.
void read_bytes(const std::string& path, void* buf, uint64_t n, uint64_t offset) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
    auto* p = static_cast<char*>(buf);
    while (n > 0) {
        ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            ::close(fd);
            fail(path, r == 0 ? "the file ended early (truncated)" : fmt::format("read failed: {}", std::strerror(errno)));
        }
        p += r;
        n -= static_cast<uint64_t>(r);
        offset += static_cast<uint64_t>(r);
    }
    ::close(fd);
}

}  // namespace

namespace detail {

std::string rank_file_name(int rank, int world_size) {
    return fmt::format("rank-{:05d}-of-{:05d}.safetensors", rank, world_size);
}

uint64_t file_fnv1a64(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path, fmt::format("cannot open: {}", std::strerror(errno)));
    uint64_t h = 0xcbf29ce484222325ULL;
    std::vector<char> buf(1 << 20);
    while (in) {
        in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
        for (std::streamsize i = 0; i < in.gcount(); ++i) {
            h ^= static_cast<unsigned char>(buf[static_cast<size_t>(i)]);
            h *= 0x100000001b3ULL;
        }
    }
    return h;
}

std::string hex64(uint64_t v) { return fmt::format("{:016x}", v); }

SavedCheckpoint open_checkpoint(const std::string& dir, int only_rank) {
    SavedCheckpoint ck;
    ck.dir = dir;
    ck.manifest_path = (fs::path(dir) / kManifestName).string();
    ck.manifest = read_manifest(dir);
    const json& m = ck.manifest;
    const int W = m.at("world_size").get<int>();
    const int64_t total = m.at("numel").get<int64_t>();
    if (!m.at("files").is_array() || static_cast<int>(m.at("files").size()) != W)
        fail(ck.manifest_path, fmt::format("lists {} rank files for world size {}", m.at("files").size(), W));
    int64_t next = 0;
    for (int r = 0; r < W; ++r) {
        const json& f = m.at("files")[static_cast<size_t>(r)];
        RankFile rf;
        rf.rank = r;
        rf.path = (fs::path(dir) / f.at("file").get<std::string>()).string();
        rf.flat_begin = f.at("flat_begin").get<int64_t>();
        rf.numel = f.at("numel").get<int64_t>();
        if (f.at("rank").get<int>() != r || rf.flat_begin != next || rf.numel < 0)
            fail(ck.manifest_path, fmt::format("file entry {} does not continue the flat range at {}", r, next));
        next += rf.numel;
        if (only_rank >= 0 && r != only_rank) continue;
        struct stat st {};
        if (::stat(rf.path.c_str(), &st) != 0)
            fail(rf.path, fmt::format("missing: the manifest names it as rank {}'s part, but it cannot be read ({})", r,
                                      std::strerror(errno)));
        const auto bytes = f.at("bytes").get<int64_t>();
        if (st.st_size != bytes)
            fail(rf.path, fmt::format("is {} bytes, the manifest says {} (truncated or replaced)", st.st_size, bytes));
        if (hex64(file_fnv1a64(rf.path)) != f.at("fnv1a64").get<std::string>())
            fail(rf.path, fmt::format("checksum mismatch: FNV-1a {} but the manifest says {} (corrupt)",
                                      hex64(file_fnv1a64(rf.path)), f.at("fnv1a64").get<std::string>()));
        try {
            rf.header = io::read_safetensors_header(rf.path);
        } catch (const IOError& e) {
            fail(rf.path, fmt::format("unreadable safetensors header: {}", e.what()));
        }
        ck.files.push_back(std::move(rf));
    }
    if (next != total) fail(ck.manifest_path, fmt::format("the rank files hold {} elements, the parameters {}", next, total));
    return ck;
}

void check_parameters(const SavedCheckpoint& ck, const std::vector<std::string>& names,
                      const std::vector<std::vector<int64_t>>& shapes) {
    const json& saved = ck.manifest.at("parameters");
    const size_t n = std::min(saved.size(), names.size());
    for (size_t i = 0; i < n; ++i) {
        const std::string name = saved[i].at("name").get<std::string>();
        const auto shape = saved[i].at("shape").get<std::vector<int64_t>>();
        if (name != names[i])
            fail(ck.manifest_path, fmt::format("parameter #{} is '{}' in the checkpoint but '{}' in the model", i, name,
                                               names[i]));
        if (shape != shapes[i])
            fail(ck.manifest_path, fmt::format("parameter '{}' has shape [{}] in the checkpoint but [{}] in the model",
                                               name, fmt::join(shape, ", "), fmt::join(shapes[i], ", ")));
    }
    if (saved.size() > n)
        fail(ck.manifest_path, fmt::format("the checkpoint has {} trainable parameters, the model {}: '{}' is not in the model",
                                           saved.size(), names.size(), saved[n].at("name").get<std::string>()));
    if (names.size() > n)
        fail(ck.manifest_path, fmt::format("the checkpoint has {} trainable parameters, the model {}: no '{}' in the checkpoint",
                                           saved.size(), names.size(), names[n]));
}

bool has_tensor(const RankFile& file, const std::string& name) { return find_entry(file, name) != nullptr; }

Tensor read_whole(const RankFile& file, const std::string& name) {
    const io::TensorEntry* e = find_entry(file, name);
    if (!e) fail(file.path, fmt::format("has no tensor '{}'", name));
    Tensor t = empty(Shape(e->shape), TensorOptions().dtype(dtype_of(e->dtype, file.path)));
    read_bytes(file.path, t.raw_data(), e->end - e->begin, file.header.data_start() + e->begin);
    return t;
}

Tensor read_flat_range(const SavedCheckpoint& ck, const std::string& name, int64_t begin, int64_t end) {
    const io::TensorEntry* first = find_entry(ck.files.at(0), name);
    if (!first) fail(ck.files[0].path, fmt::format("has no tensor '{}'", name));
    const DType dt = dtype_of(first->dtype, ck.files[0].path);
    Tensor out = zeros({std::max<int64_t>(end - begin, 0)}, TensorOptions().dtype(dt));
    const uint64_t es = element_size(dt);
    for (const RankFile& f : ck.files) {
        const int64_t lo = std::max(begin, f.flat_begin), hi = std::min(end, f.flat_begin + f.numel);
        if (lo >= hi) continue;
        const io::TensorEntry* e = find_entry(f, name);
        if (!e) fail(f.path, fmt::format("has no tensor '{}'", name));
        if (e->dtype != first->dtype) fail(f.path, fmt::format("tensor '{}' is {}, rank 0's is {}", name, e->dtype, first->dtype));
        if (static_cast<int64_t>((e->end - e->begin) / es) != f.numel)
            fail(f.path, fmt::format("tensor '{}' has {} elements, the manifest says this file holds {}", name,
                                     (e->end - e->begin) / es, f.numel));
        const uint64_t offset = f.header.data_start() + e->begin + static_cast<uint64_t>(lo - f.flat_begin) * es;
        read_bytes(f.path, static_cast<char*>(out.raw_data()) + static_cast<uint64_t>(lo - begin) * es,
                   static_cast<uint64_t>(hi - lo) * es, offset);
    }
    return out;
}

}  // namespace detail

// ---- public: finding and reading the manifest ----

std::string resolve_checkpoint(const std::string& path, const std::string& marker, const std::string& kind) {
    if (fs::exists(fs::path(path) / marker)) return path;
    const fs::path latest = fs::path(path) / "latest";
    if (!fs::exists(latest)) {
        if (fs::exists(fs::path(path) / "checkpoints" / "latest"))   // a run's output folder
            return resolve_checkpoint((fs::path(path) / "checkpoints").string(), marker, kind);
        throw CheckpointError(fmt::format("{} {}: no checkpoint there (neither {} nor a latest file)", kind, path, marker));
    }
    std::ifstream in(latest);
    std::string name;
    std::getline(in, name);
    while (!name.empty() && (name.back() == ' ' || name.back() == '\r')) name.pop_back();
    const fs::path dir = fs::path(path) / name;
    if (name.empty() || !fs::exists(dir / marker))
        throw CheckpointError(fmt::format("{} {}: names \"{}\", which holds no {}", kind, latest.string(), name, marker));
    return dir.string();
}

json read_manifest(const std::string& dir) {
    const std::string path = (fs::path(dir) / kManifestName).string();
    std::ifstream in(path, std::ios::binary);
    if (!in) fail(path, "missing: not a ZeRO checkpoint, or a save that did not finish");
    std::stringstream text;
    text << in.rdbuf();
    json m;
    try {
        m = json::parse(text.str());
    } catch (const json::exception& e) {
        fail(path, fmt::format("truncated or corrupt JSON: {}", e.what()));
    }
    if (!m.is_object() || !m.contains("format") || m["format"] != "ampgrad-zero-checkpoint")
        fail(path, "not an ampgrad ZeRO manifest (no \"format\": \"ampgrad-zero-checkpoint\")");
    if (!m.contains("version") || m["version"] != 1)
        fail(path, fmt::format("version {} is not supported (1 is)", m.contains("version") ? m["version"].dump() : "(none)"));
    for (const char* key : {"world_size", "stage", "numel", "parameters", "files", "optimizer", "scaler", "counters",
                            "scheduler"})
        if (!m.contains(key)) fail(path, fmt::format("the key \"{}\" is missing", key));
    return m;
}

}  // namespace ampgrad::zero
