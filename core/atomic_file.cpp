// atomic_file.cpp: temporary file, write, fsync, rename, fsync of the folder (core/atomic_file.hpp).
#include "core/atomic_file.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

#include "core/error.hpp"

namespace ampgrad {

namespace fs = std::filesystem;

namespace {

// IOError "WHAT PATH: REASON" for the errno value `err`.
[[noreturn]] void fail(const char* what, const std::string& path, int err) {
    throw IOError(fmt::format("{} {}: {}", what, path, std::strerror(err)));
}

// Closes `fd` (if open) and removes `tmp`, keeping errno as it was.
void discard(int fd, const std::string& tmp) {
    const int saved = errno;
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    errno = saved;
}

std::string temporary_name(const std::string& path) {
    static std::atomic<uint64_t> counter{0};   // several threads may write beside the same file
    return fmt::format("{}.tmp-{}-{}", path, ::getpid(), counter++);
}

}  // namespace

void write_all(int fd, const void* data, size_t size, const std::string& path) {
    const auto* p = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd, p, std::min<size_t>(size, size_t{1} << 30));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail("cannot write", path, n < 0 ? errno : ENOSPC);
        p += n;
        size -= static_cast<size_t>(n);
    }
}

void create_directories(const std::string& dir, const std::string& op) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw IOError(fmt::format("{}: cannot create the folder {}: {}", op, dir, ec.message()));
}

void fsync_directory(const std::string& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) fail("cannot open the folder", dir, errno);
    const bool ok = ::fsync(fd) == 0 || errno == EINVAL;   // some filesystems cannot sync a folder
    const int err = errno;
    ::close(fd);
    if (!ok) fail("cannot fsync the folder", dir, err);
}

void write_file_atomic(const std::string& path, const std::function<void(int fd)>& write_contents) {
    const fs::path target(path);
    if (target.filename().empty()) throw IOError(fmt::format("cannot write {}: the path names a folder, not a file", path));
    const std::string tmp = temporary_name(path);
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) fail("cannot create a temporary file for", path, errno);
    try {
        write_contents(fd);
        if (::fsync(fd) != 0) fail("cannot flush", path, errno);
    } catch (...) {
        discard(fd, tmp);
        throw;
    }
    if (::close(fd) != 0) {
        discard(-1, tmp);
        fail("cannot flush", path, errno);
    }
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
        discard(-1, tmp);
        fail("cannot rename into place", path, errno);
    }
    fsync_directory(target.parent_path().empty() ? "." : target.parent_path().string());
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
    write_file_atomic(path, [&](int fd) { write_all(fd, bytes.data(), bytes.size(), path); });
}

}  // namespace ampgrad
