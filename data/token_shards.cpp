// token_shards.cpp: llm.c's token shard files (data/token_shards.hpp).
#include "data/token_shards.hpp"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace ampgrad::data {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void io_fail(const std::string& what, const std::string& path) {
    throw IOError(fmt::format("token shard {}: {}: {}", path, what, std::strerror(errno)));
}

int32_t read_le32(const unsigned char* p) {
    return static_cast<int32_t>(static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
                                static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24);
}

void write_le32(char* p, uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xFF);
}

// Reads exactly n bytes at offset, or fewer at the end of the file; returns the count read.
size_t pread_full(int fd, void* dst, size_t n, off_t offset, const std::string& path) {
    size_t done = 0;
    while (done < n) {
        const ssize_t r = ::pread(fd, static_cast<char*>(dst) + done, n - done, offset + static_cast<off_t>(done));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) io_fail("cannot read", path);
        if (r == 0) break;
        done += static_cast<size_t>(r);
    }
    return done;
}

class FileHandle {
public:
    explicit FileHandle(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC)) {
        if (fd_ < 0) io_fail("cannot open", path);
    }
    ~FileHandle() { ::close(fd_); }
    FileHandle(const FileHandle&) = delete;
    FileHandle& operator=(const FileHandle&) = delete;
    int fd() const { return fd_; }

private:
    int fd_;
};

uint64_t file_size(int fd, const std::string& path) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) io_fail("cannot stat", path);
    return static_cast<uint64_t>(st.st_size);
}

// The header checks of llm.c's dataloader.h, each naming the byte offset it looked at.
ShardHeader parse_header(const unsigned char* h, uint64_t size, const std::string& path) {
    if (size < static_cast<uint64_t>(kShardHeaderBytes))
        throw FormatError(fmt::format("token shard {}: {} bytes, shorter than the {}-byte header (offset {})", path,
                                      size, kShardHeaderBytes, size));
    const int32_t magic = read_le32(h), version = read_le32(h + 4), count = read_le32(h + 8);
    ShardHeader out;
    if (magic == kGpt2ShardMagic && version == kGpt2ShardVersion) out.dtype = ShardDtype::kUint16;
    else if (magic == kLlama3ShardMagic && version == kLlama3ShardVersion) out.dtype = ShardDtype::kUint32;
    else if (magic != kGpt2ShardMagic && magic != kLlama3ShardMagic)
        throw FormatError(fmt::format("token shard {}: bad magic {} at offset 0 (llm.c's are {} for uint16 tokens and "
                                      "{} for uint32)", path, magic, kGpt2ShardMagic, kLlama3ShardMagic));
    else
        throw FormatError(fmt::format("token shard {}: magic {} with version {} at offset 4 (expected {})", path, magic,
                                      version, magic == kGpt2ShardMagic ? kGpt2ShardVersion : kLlama3ShardVersion));
    if (count < 0)
        throw FormatError(fmt::format("token shard {}: negative token count {} at offset 8", path, count));
    out.num_tokens = count;
    if (size != static_cast<uint64_t>(out.file_bytes()))
        throw FormatError(fmt::format("token shard {}: the header at offset 8 counts {} {} tokens ({} bytes with the "
                                      "header), but the file has {} bytes{}", path, count, shard_dtype_name(out.dtype),
                                      out.file_bytes(), size,
                                      size < static_cast<uint64_t>(out.file_bytes()) ? " (truncated)" : ""));
    return out;
}

}  // namespace

ShardDtype shard_dtype_for_vocab(int64_t vocab_size) {
    return vocab_size <= 65536 ? ShardDtype::kUint16 : ShardDtype::kUint32;
}

const char* shard_dtype_name(ShardDtype dtype) { return dtype == ShardDtype::kUint16 ? "uint16" : "uint32"; }

std::string encode_shard_header(ShardDtype dtype, int64_t num_tokens) {
    if (num_tokens < 0 || num_tokens > INT32_MAX)
        throw ValueError(fmt::format("token shard: {} tokens do not fit the header's int32 count", num_tokens));
    std::string h(static_cast<size_t>(kShardHeaderBytes), '\0');
    const bool u16 = dtype == ShardDtype::kUint16;
    write_le32(h.data(), static_cast<uint32_t>(u16 ? kGpt2ShardMagic : kLlama3ShardMagic));
    write_le32(h.data() + 4, static_cast<uint32_t>(u16 ? kGpt2ShardVersion : kLlama3ShardVersion));
    write_le32(h.data() + 8, static_cast<uint32_t>(num_tokens));
    return h;
}

ShardHeader read_shard_header(const std::string& path) {
    FileHandle f(path);
    std::array<unsigned char, kShardHeaderBytes> h{};
    const uint64_t size = file_size(f.fd(), path);
    pread_full(f.fd(), h.data(), h.size(), 0, path);
    return parse_header(h.data(), size, path);
}

ShardCheck check_shard(const std::string& path, int64_t vocab_size) {
    FileHandle f(path);
    std::array<unsigned char, kShardHeaderBytes> h{};
    const uint64_t size = file_size(f.fd(), path);
    pread_full(f.fd(), h.data(), h.size(), 0, path);
    ShardCheck out;
    out.header = parse_header(h.data(), size, path);
    const int64_t tb = out.header.token_bytes();
    const int64_t chunk_tokens = int64_t{1} << 20;
    std::vector<unsigned char> chunk(static_cast<size_t>(chunk_tokens * tb));
    ::posix_fadvise(f.fd(), 0, 0, POSIX_FADV_SEQUENTIAL);
    for (int64_t first = 0; first < out.header.num_tokens; first += chunk_tokens) {
        const int64_t n = std::min(chunk_tokens, out.header.num_tokens - first);
        const off_t offset = static_cast<off_t>(kShardHeaderBytes + first * tb);
        if (pread_full(f.fd(), chunk.data(), static_cast<size_t>(n * tb), offset, path) != static_cast<size_t>(n * tb))
            throw FormatError(fmt::format("token shard {}: ends early near offset {} (the file shrank while read)", path,
                                          offset));
        for (int64_t i = 0; i < n; ++i) {
            const unsigned char* p = chunk.data() + i * tb;
            const int64_t id = tb == 2 ? static_cast<int64_t>(p[0] | p[1] << 8) : static_cast<uint32_t>(read_le32(p));
            out.max_token = std::max(out.max_token, id);
            if (vocab_size > 0 && id >= vocab_size)
                throw FormatError(fmt::format("token shard {}: token {} (id {}) at byte offset {} is outside the model's "
                                              "vocabulary of {}", path, first + i, id, offset + i * tb, vocab_size));
        }
    }
    return out;
}

// ---- ShardWriter ----

ShardWriter::ShardWriter(std::string path, ShardDtype dtype)
    : path_(std::move(path)), tmp_path_(fmt::format("{}.tmp-{}", path_, ::getpid())), dtype_(dtype) {
    fd_ = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) io_fail("cannot create", tmp_path_);
    const std::string placeholder = encode_shard_header(dtype_, 0);   // the real count comes in finish()
    buffer_.assign(placeholder.begin(), placeholder.end());
}

ShardWriter::~ShardWriter() {
    if (fd_ >= 0) {
        ::close(fd_);
        ::unlink(tmp_path_.c_str());
    }
}

void ShardWriter::append(const int32_t* ids, size_t n) {
    if (fd_ < 0) throw ValueError(fmt::format("token shard {}: append after finish()", path_));
    const int64_t limit = dtype_ == ShardDtype::kUint16 ? 65535 : INT32_MAX;
    const size_t tb = dtype_ == ShardDtype::kUint16 ? 2 : 4;
    const size_t old_size = buffer_.size();
    buffer_.resize(old_size + n * tb);
    char* p = buffer_.data() + old_size;
    for (size_t i = 0; i < n; ++i, p += tb) {
        if (ids[i] < 0 || ids[i] > limit) {
            buffer_.resize(old_size);   // none of this call's ids: the count and the bytes stay in step
            throw ValueError(fmt::format("token shard {}: token id {} does not fit {}", path_, ids[i], shard_dtype_name(dtype_)));
        }
        const auto v = static_cast<uint32_t>(ids[i]);
        p[0] = static_cast<char>(v & 0xFF);
        p[1] = static_cast<char>((v >> 8) & 0xFF);
        if (tb == 4) {
            p[2] = static_cast<char>((v >> 16) & 0xFF);
            p[3] = static_cast<char>((v >> 24) & 0xFF);
        }
    }
    num_tokens_ += static_cast<int64_t>(n);
    if (buffer_.size() >= (size_t{8} << 20)) flush_buffer();
}

void ShardWriter::flush_buffer() {
    write_all(fd_, buffer_.data(), buffer_.size(), tmp_path_);
    buffer_.clear();
}

void ShardWriter::finish() {
    if (fd_ < 0) throw ValueError(fmt::format("token shard {}: finish() twice", path_));
    flush_buffer();
    const std::string header = encode_shard_header(dtype_, num_tokens_);
    if (::pwrite(fd_, header.data(), header.size(), 0) != static_cast<ssize_t>(header.size())) io_fail("cannot write the header of", tmp_path_);
    if (::fsync(fd_) != 0) io_fail("cannot flush", tmp_path_);
    ::close(fd_);
    fd_ = -1;
    if (::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp_path_.c_str());
        errno = err;
        io_fail("cannot rename into place", path_);
    }
    const fs::path parent = fs::path(path_).parent_path();
    fsync_directory(parent.empty() ? "." : parent.string());
}

// ---- MappedShard ----

MappedShard::MappedShard(std::string path) : path_(std::move(path)) {
    header_ = read_shard_header(path_);
    FileHandle f(path_);
    map_bytes_ = static_cast<size_t>(header_.file_bytes());
    void* m = ::mmap(nullptr, map_bytes_, PROT_READ, MAP_SHARED, f.fd(), 0);
    if (m == MAP_FAILED) io_fail("cannot map", path_);
    map_ = static_cast<const unsigned char*>(m);
    ::madvise(m, map_bytes_, MADV_RANDOM);
}

MappedShard::~MappedShard() {
    if (map_ != nullptr) ::munmap(const_cast<unsigned char*>(map_), map_bytes_);
}

void MappedShard::read(int64_t start, int64_t n, int64_t* dst) const {
    if (start < 0 || n < 0 || start + n > header_.num_tokens)
        throw IndexError(fmt::format("token shard {}: tokens [{}, {}) are outside its {} tokens", path_, start, start + n,
                                     header_.num_tokens));
    const int64_t tb = header_.token_bytes();
    const unsigned char* p = map_ + kShardHeaderBytes + start * tb;
    for (int64_t i = 0; i < n; ++i, p += tb)
        dst[i] = tb == 2 ? static_cast<int64_t>(p[0] | p[1] << 8) : static_cast<int64_t>(static_cast<uint32_t>(read_le32(p)));
    // Hand the pages back: they stay in the page cache, but leave this process's resident set. A read
    // fault maps the neighbours already in the page cache too (Linux's fault-around, 64 KiB by
    // default), so the whole aligned 64 KiB blocks around the read go, clamped to the mapping.
    constexpr uintptr_t kBlock = 64 * 1024;
    const uintptr_t base = reinterpret_cast<uintptr_t>(map_), limit = base + map_bytes_;
    const uintptr_t first = std::max(base, reinterpret_cast<uintptr_t>(map_ + kShardHeaderBytes + start * tb) & ~(kBlock - 1));
    const uintptr_t end = std::min(limit, (reinterpret_cast<uintptr_t>(map_ + kShardHeaderBytes + (start + n) * tb) +
                                           kBlock - 1) & ~(kBlock - 1));
    ::madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);
}

// ---- finding shards ----

bool names_token_shards(const std::string& spec) {
    if (spec.find_first_of("*?[") != std::string::npos) return true;
    if (fs::is_directory(spec)) return true;
    if (fs::path(spec).extension() != ".bin" || !fs::is_regular_file(spec)) return false;
    unsigned char magic[4] = {};   // a .bin file is a shard when it starts with one of llm.c's magics
    const int fd = ::open(spec.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    const bool read = ::pread(fd, magic, 4, 0) == 4;
    ::close(fd);
    const int32_t m = read_le32(magic);
    return read && (m == kGpt2ShardMagic || m == kLlama3ShardMagic);
}

std::vector<std::string> list_shards(const std::string& spec, const std::string& split) {
    std::vector<std::string> all;
    if (fs::is_directory(spec)) {
        for (const auto& e : fs::directory_iterator(spec))
            if (e.is_regular_file() && e.path().extension() == ".bin") all.push_back(e.path().string());
    } else if (spec.find_first_of("*?[") != std::string::npos) {
        glob_t g{};
        if (::glob(spec.c_str(), 0, nullptr, &g) == 0)
            for (size_t i = 0; i < g.gl_pathc; ++i) all.emplace_back(g.gl_pathv[i]);
        ::globfree(&g);
    } else if (fs::is_regular_file(spec)) {
        all.push_back(spec);
    }
    std::sort(all.begin(), all.end());
    auto name_has = [](const std::string& p, const char* part) {
        return fs::path(p).filename().string().find(part) != std::string::npos;
    };
    std::vector<std::string> out;
    const bool any_train = std::any_of(all.begin(), all.end(), [&](const std::string& p) { return name_has(p, "_train_"); });
    for (const std::string& p : all) {
        if (split == "val" && !name_has(p, "_val_")) continue;
        if (split == "train" && (any_train ? !name_has(p, "_train_") : name_has(p, "_val_"))) continue;
        out.push_back(p);
    }
    if (out.empty())
        throw IOError(fmt::format("token shards {}: no {}shard (*.bin{}) found there", spec,
                                  split.empty() ? "" : split + " ", split.empty() ? "" : ", named *_" + split + "_*"));
    return out;
}

}  // namespace ampgrad::data
