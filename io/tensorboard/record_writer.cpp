// record_writer.cpp: TFRecord framing and the append-only file (io/tensorboard/record_writer.hpp).
#include "io/tensorboard/record_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "core/error.hpp"
#include "io/tensorboard/crc32c.hpp"

namespace ampgrad::tensorboard {

namespace {

void put_le(std::string& out, uint64_t value, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xFFu));
}

}  // namespace

std::string encode_record(std::string_view payload) {
    std::string record;
    record.reserve(payload.size() + 16);
    put_le(record, payload.size(), 8);
    put_le(record, crc32c_masked(crc32c(record)), 4);   // the CRC of the 8 length bytes
    record.append(payload);
    put_le(record, crc32c_masked(crc32c(payload)), 4);
    return record;
}

RecordFile::RecordFile(std::string path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd_ < 0) throw IOError(fmt::format("tensorboard: cannot open {} for writing: {}", path_, std::strerror(errno)));
}

RecordFile::~RecordFile() {
    try {
        flush();
    } catch (const IOError&) {   // a destructor must not throw; flush() reported nothing new to a caller
    }
    if (fd_ >= 0) ::close(fd_);
}

void RecordFile::append(std::string_view payload) {
    pending_ += encode_record(payload);
    ++records_;
}

void RecordFile::flush() {
    size_t done = 0;
    while (done < pending_.size()) {
        const ssize_t n = ::write(fd_, pending_.data() + done, pending_.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            const std::string reason = std::strerror(errno);
            pending_.erase(0, done);
            throw IOError(fmt::format("tensorboard: writing {} failed (is the disk full?): {}", path_, reason));
        }
        done += static_cast<size_t>(n);
    }
    pending_.clear();
}

}  // namespace ampgrad::tensorboard
