// atomic_file.hpp: the one way ampgrad writes a file: whole or not at all, and durably.
// write_file_atomic writes into a temporary file in the same folder (PATH.tmp-PID-N), fsyncs it,
// renames it over PATH and then fsyncs the folder, so a crash at any moment leaves either the old
// file or the new one. Every failure is an IOError naming PATH and the system's reason, and the
// temporary file is removed. Used by io/ (safetensors), zero/ and app/ checkpoints, data/ meta.
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace ampgrad {

// Writes `bytes` to `path` atomically (see above).
void write_file_atomic(const std::string& path, std::string_view bytes);

// The same, for contents produced piece by piece: `write_contents` is given the temporary file's
// descriptor and writes to it (with write_all); anything it throws removes the temporary file.
void write_file_atomic(const std::string& path, const std::function<void(int fd)>& write_contents);

// Writes all `size` bytes to `fd` (retrying short writes and EINTR); IOError naming `path` on failure.
void write_all(int fd, const void* data, size_t size, const std::string& path);

// Creates the folder `dir` and its parents (std::filesystem::create_directories), raising an IOError
// that names `op`, the folder and the system's reason instead of std::filesystem_error.
void create_directories(const std::string& dir, const std::string& op);

// fsyncs the folder `dir` (so a rename in it survives a crash). A filesystem that cannot sync a
// folder (EINVAL) is accepted; other failures are an IOError naming the folder.
void fsync_directory(const std::string& dir);

}  // namespace ampgrad
