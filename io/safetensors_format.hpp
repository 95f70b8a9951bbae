// safetensors_format.hpp: the safetensors container format, without tensors: reading and
// validating a header, and writing one. (io/safetensors.hpp builds tensors on top of this.)
//
// A file is: 8 bytes N (unsigned little-endian), N bytes of UTF-8 JSON (the header), then the
// data section. The header maps each tensor name to {"dtype": "F32", "shape": [2, 3],
// "data_offsets": [begin, end]} (byte offsets relative to the data section) and may hold a
// "__metadata__" object of string -> string. Published by Hugging Face (huggingface/safetensors,
// README "Format").
//
// This layer depends only on nlohmann-json, fmt and core/error.hpp, so the fuzz target
// (tools/fuzz/) can build it alone. Everything it accepts is safe to allocate and read: every
// check below runs before any tensor memory is touched.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ampgrad::io {

// The largest header accepted (the Python package's limit too).
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

// Bytes per element of a safetensors dtype name ampgrad supports (F64 F32 F16 BF16 I64 I32
// BOOL), or nullopt for any other name.
std::optional<uint64_t> safetensors_dtype_size(std::string_view dtype);

struct TensorEntry {
    std::string name;
    std::string dtype;              // "F32", ...
    std::vector<int64_t> shape;
    uint64_t begin = 0, end = 0;    // byte range inside the data section
};

// A validated header. Guarantees: names are distinct and not "__metadata__"; dtypes are known;
// every shape's element count fits int64 and its bytes equal end - begin; the ranges tile the
// data section exactly (sorted by begin, no overlap, no hole, last end == data_bytes).
struct Header {
    std::vector<TensorEntry> tensors;            // in data order (by begin)
    std::map<std::string, std::string> metadata;
    uint64_t header_bytes = 0;                   // N, the JSON length
    uint64_t data_bytes = 0;                     // file size - 8 - N
    uint64_t data_start() const { return 8 + header_bytes; }
};

// Reads N from the first 8 bytes and checks it against the file size. `source` (the file name)
// starts every error. Throws FormatError.
uint64_t parse_header_length(const unsigned char* first8, uint64_t file_bytes, const std::string& source);

// Parses and validates the JSON header text for a data section of `data_bytes` bytes.
Header parse_header(std::string_view json, uint64_t data_bytes, const std::string& source);

// Both steps on a whole file held in memory (what the fuzzer feeds).
Header parse_safetensors(const unsigned char* bytes, uint64_t size, const std::string& source);

// The header text for `tensors` (whose ranges the caller has laid out) and `metadata`, padded
// with spaces so that the data section starts at a multiple of 8 bytes, as the Python writer does.
std::string serialize_header(const std::vector<TensorEntry>& tensors, const std::map<std::string, std::string>& metadata);

}  // namespace ampgrad::io
