// summary_writer.cpp: Event protobufs for scalars, histograms and text (io/tensorboard/summary_writer.hpp).
// The messages come from protoc (io/tensorboard/proto/*.proto); which field holds what follows
// TensorBoard's readers: a scalar is Summary.Value.simple_value, a histogram Summary.Value.histo, and
// text a DT_STRING tensor whose metadata names the "text" plugin.
#include "io/tensorboard/summary_writer.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "core/error.hpp"
#include "event.pb.h"

namespace ampgrad::tensorboard {

namespace fs = std::filesystem;

namespace {

double unix_now() {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
    char name[256] = {};
    if (::gethostname(name, sizeof(name) - 1) != 0) return "localhost";
    return name;
}

tensorflow::Event event_at(int64_t step) {
    tensorflow::Event e;
    e.set_wall_time(unix_now());
    e.set_step(step);
    return e;
}

std::string serialized(const tensorflow::Event& e) {
    std::string bytes;
    if (!e.SerializeToString(&bytes)) throw IOError("tensorboard: protobuf could not serialize an Event");
    return bytes;
}

void make_directory(const std::string& dir) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw IOError(fmt::format("tensorboard: cannot create directory {}: {}", dir, ec.message()));
    if (!fs::is_directory(dir)) throw IOError(fmt::format("tensorboard: {} exists and is not a directory", dir));
}

}  // namespace

std::string event_file_name(double unix_time) {
    static std::atomic<int64_t> files_opened{0};
    return fmt::format("events.out.tfevents.{:010d}.{}.{}.{}", static_cast<int64_t>(unix_time), host_name(),
                       static_cast<long>(::getpid()), files_opened++);
}

SummaryWriter::SummaryWriter(const std::string& dir, int64_t flush_every) : flush_every_(std::max<int64_t>(flush_every, 1)) {
    make_directory(dir);
    const double now = unix_now();
    file_ = std::make_unique<RecordFile>((fs::path(dir) / event_file_name(now)).string());
    tensorflow::Event first;
    first.set_wall_time(now);
    first.set_file_version("brain.Event:2");
    file_->append(serialized(first));
    file_->flush();   // TensorBoard lists the run as soon as the file holds its first record
}

void SummaryWriter::append(const std::string& event_bytes) {
    file_->append(event_bytes);
    if (++since_flush_ >= flush_every_) {
        file_->flush();
        since_flush_ = 0;
    }
}

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t step) {
    tensorflow::Event e = event_at(step);
    tensorflow::Summary::Value* v = e.mutable_summary()->add_value();
    v->set_tag(tag);
    v->set_simple_value(static_cast<float>(value));
    append(serialized(e));
}

void SummaryWriter::add_histogram(const std::string& tag, const Histogram& h, int64_t step) {
    tensorflow::Event e = event_at(step);
    tensorflow::Summary::Value* v = e.mutable_summary()->add_value();
    v->set_tag(tag);
    tensorflow::HistogramProto* p = v->mutable_histo();
    p->set_min(h.min);
    p->set_max(h.max);
    p->set_num(h.num);
    p->set_sum(h.sum);
    p->set_sum_squares(h.sum_squares);
    for (double limit : h.bucket_limit) p->add_bucket_limit(limit);
    for (double count : h.bucket) p->add_bucket(count);
    append(serialized(e));
}

void SummaryWriter::add_text(const std::string& tag, const std::string& text, int64_t step) {
    tensorflow::Event e = event_at(step);
    tensorflow::Summary::Value* v = e.mutable_summary()->add_value();
    v->set_tag(tag);
    tensorflow::SummaryMetadata* meta = v->mutable_metadata();
    meta->mutable_plugin_data()->set_plugin_name("text");   // content: an empty TextPluginData (version 0)
    meta->set_data_class(tensorflow::DATA_CLASS_TENSOR);
    tensorflow::TensorProto* t = v->mutable_tensor();
    t->set_dtype(tensorflow::DT_STRING);
    t->mutable_tensor_shape();   // no dims: a scalar string
    t->add_string_val(text);
    append(serialized(e));
}

}  // namespace ampgrad::tensorboard
