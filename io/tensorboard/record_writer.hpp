// record_writer.hpp: an append-only file of TFRecord records, the framing of TensorBoard's tfevents
// files. One record on disk is
//   [uint64 length, little-endian][uint32 masked CRC-32C of those 8 bytes][payload][uint32 masked CRC-32C of payload]
// (tensorflow/core/lib/io/record_writer.cc). Records are buffered in memory and written whole by
// flush(): after a crash the file holds every record up to the last flush, and no torn one from
// a later flush unless the process died inside write(2) itself.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace ampgrad::tensorboard {

// The bytes of one record around `payload`.
std::string encode_record(std::string_view payload);

class RecordFile {
public:
    // Opens (creates) `path` for appending; IOError naming the path and the system's reason.
    explicit RecordFile(std::string path);
    ~RecordFile();   // flushes what is buffered (errors are dropped here: call flush() to see them)
    RecordFile(const RecordFile&) = delete;
    RecordFile& operator=(const RecordFile&) = delete;

    void append(std::string_view payload);   // buffered until flush()
    void flush();                            // writes the buffered records; IOError on a failed write
    const std::string& path() const { return path_; }
    int64_t records_written() const { return records_; }

private:
    std::string path_;
    int fd_ = -1;
    std::string pending_;   // encoded records not yet written
    int64_t records_ = 0;
};

}  // namespace ampgrad::tensorboard
