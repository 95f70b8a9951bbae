// summary_writer.hpp: writes TensorBoard event files (tfevents) that TensorBoard and its Python
// readers open: scalars, histograms and text, each an Event protobuf (io/tensorboard/proto/, the
// subset of TensorFlow's event.proto and summary.proto) framed as a TFRecord (record_writer.hpp).
//
//   tensorboard::SummaryWriter tb("runs/nano/tb");        // events.out.tfevents.<time>.<host>.<pid>.<n>
//   tb.add_scalar("train/loss", 3.21, step);                // Summary.Value.simple_value
//   tb.add_histogram("weights/lm_head.weight", histogram_of(values), step);
//   tb.add_text("sample", "ROMEO: ...", step);              // the text plugin's string tensor
//
// The first record of a file is Event{file_version: "brain.Event:2"}, as TensorFlow writes. Records
// reach the disk every `flush_every` records, on flush() and on destruction.
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "io/tensorboard/histogram.hpp"
#include "io/tensorboard/record_writer.hpp"

namespace ampgrad::tensorboard {

// events.out.tfevents.<unix time, 10 digits>.<host name>.<pid>.<n>, n counting the files this process
// opened, as TensorBoard's EventFileWriter names them.
std::string event_file_name(double unix_time);

class SummaryWriter {
public:
    // Creates `dir` (and its parents) and a fresh event file in it. IOError naming the directory
    // when it cannot be created or is not a directory.
    explicit SummaryWriter(const std::string& dir, int64_t flush_every = 10);

    void add_scalar(const std::string& tag, double value, int64_t step);   // stored as a float32
    void add_histogram(const std::string& tag, const Histogram& h, int64_t step);
    void add_text(const std::string& tag, const std::string& text, int64_t step);   // markdown
    void flush() { file_->flush(); }
    const std::string& path() const { return file_->path(); }

private:
    void append(const std::string& event_bytes);   // one serialized Event
    std::unique_ptr<RecordFile> file_;
    int64_t flush_every_;
    int64_t since_flush_ = 0;
};

}  // namespace ampgrad::tensorboard
