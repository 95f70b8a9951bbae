// safetensors.hpp: saving and loading named tensors in the safetensors format (the files the
// Python `safetensors` package and Hugging Face use; the container is described in
// io/safetensors_format.hpp, the choices ampgrad makes in docs/io.md).
//
//   io::save_safetensors("model.safetensors", model->state_dict(), {{"step", "1000"}});
//   io::SafetensorsFile f = io::load_safetensors("model.safetensors");
//   model->load_state_dict(f);                   // or f.tensors, or io::load_state_dict(*model, path)
//
// Tied weights: entries that view the same memory (same storage, offset, shape, strides and
// dtype, e.g. GPT's lm_head.weight and wte.weight) are written once, under the first name; the
// others are recorded in __metadata__["ampgrad.tied"] as a JSON object {alias: stored name}.
// Loading returns each alias as the same Tensor as its stored name, so the tie survives.
//
// Errors: IOError when a file cannot be opened, read or written; FormatError (an IOError) when
// its content breaks the format; each message names the file and the fact.
#pragma once
#include <map>
#include <string>

#include "io/safetensors_format.hpp"
#include "nn/module.hpp"

namespace ampgrad::io {

using Metadata = std::map<std::string, std::string>;

// The __metadata__ key under which tied names are recorded (reserved: a caller's metadata may
// not use it).
inline constexpr const char* kTiedMetadataKey = "ampgrad.tied";

// Writes `tensors` (any device, dtype and layout; copied to contiguous little-endian host
// bytes) atomically: into a temporary file in the same directory, fsync'd, renamed over `path`,
// then the directory fsync'd. A crash leaves either the old file or the new one.
// ValueError for an undefined tensor, the name "__metadata__" or the reserved metadata key.
void save_safetensors(const std::string& path, const nn::NamedTensors& tensors, const Metadata& metadata = {});

// Writes `bytes` to `path` the same atomic way, for the text files that travel with a safetensors
// file (e.g. a Hugging Face folder's config.json). The library's one writer, core/atomic_file.hpp.
void write_file_atomic(const std::string& path, const std::string& bytes);

struct SafetensorsFile {
    nn::NamedTensors tensors;                  // in file order; each alias right after its target
    Metadata metadata;                         // __metadata__ without the "ampgrad.tied" entry
    std::map<std::string, std::string> tied;   // alias -> the stored name it shares memory with

    // The file read as the dict Python's safetensors.torch.load_file returns: file.at("w"), file["w"],
    // file.size(), for (const auto& [name, t] : file)
    const Tensor& at(const std::string& name) const { return tensors.at(name); }
    const Tensor& operator[](const std::string& name) const { return tensors.at(name); }
    bool contains(const std::string& name) const { return tensors.contains(name); }
    size_t size() const { return tensors.size(); }
    auto begin() const { return tensors.begin(); }
    auto end() const { return tensors.end(); }
    // model->load_state_dict(io::load_safetensors(path)), as Python's model.load_state_dict(load_file(path))
    operator const nn::NamedTensors&() const { return tensors; }   // NOLINT: the file reads as its dict
};

// Reads and validates the whole header first (io/safetensors_format.hpp), then allocates each
// tensor on `device` and reads its bytes. BOOL bytes other than 0 and 1 are a FormatError.
SafetensorsFile load_safetensors(const std::string& path, Device device = Device(kCPU));

// Only the validated header (names, dtypes, shapes, metadata): no tensor data is read.
Header read_safetensors_header(const std::string& path);

// One open safetensors file whose tensors are read one at a time, on demand: the header is read
// and validated when it opens, and read(name) reads that tensor's bytes alone (one pread into a new
// CPU tensor). A loader that copies each tensor into its destination before reading the next keeps
// peak host memory near one copy of the model (models/pretrained.cpp reads sharded checkpoints so).
//
//   io::SafetensorsReader f("model-00001-of-00002.safetensors");
//   for (const io::TensorEntry& e : f.header().tensors) use(e.name, f.read(e.name));
class SafetensorsReader {
public:
    explicit SafetensorsReader(const std::string& path);   // IOError / FormatError naming the file
    ~SafetensorsReader();
    SafetensorsReader(const SafetensorsReader&) = delete;
    SafetensorsReader& operator=(const SafetensorsReader&) = delete;

    const std::string& path() const { return path_; }
    const Header& header() const { return header_; }
    const TensorEntry* find(const std::string& name) const;   // null when the file has no such tensor
    // The tensor's bytes as a new contiguous CPU tensor of the file's dtype; ValueError naming the
    // file and the tensor when there is none.
    Tensor read(const std::string& name) const;

private:
    std::string path_;
    int fd_ = -1;
    Header header_;
};

// A module's state_dict() to a file, and back (load_state_dict with its strict semantics).
void save_state_dict(const nn::Module& module, const std::string& path, const Metadata& metadata = {});
void load_state_dict(nn::Module& module, const std::string& path, bool strict = true);

}  // namespace ampgrad::io
