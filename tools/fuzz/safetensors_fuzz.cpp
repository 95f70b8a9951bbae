// safetensors_fuzz.cpp: a libFuzzer target for the safetensors reader's parsing and validation
// core (io/safetensors_format.cpp, built alone: see tools/fuzz/run.sh). Every input must either
// parse into a header that honours all the documented guarantees or raise FormatError; any
// other exception, crash or sanitizer report is a bug. An accepted header is also written back
// with serialize_header and must parse to the same description.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.hpp"
#include "io/safetensors_format.hpp"

namespace {

void require(bool ok, const char* what) {
    if (!ok) {
        fprintf(stderr, "safetensors_fuzz: broken guarantee: %s\n", what);
        abort();
    }
}

void check_guarantees(const ampgrad::io::Header& h, uint64_t size) {
    require(h.data_start() + h.data_bytes == size, "header and data sizes add up to the file size");
    uint64_t covered = 0;
    for (size_t i = 0; i < h.tensors.size(); ++i) {
        const auto& t = h.tensors[i];
        require(t.begin == covered && t.begin <= t.end && t.end <= h.data_bytes, "ranges tile the data section");
        require(t.name != "__metadata__", "no tensor is called __metadata__");
        for (size_t j = 0; j < i; ++j) require(h.tensors[j].name != t.name, "names are distinct");
        uint64_t numel = 1;
        for (int64_t d : t.shape) {
            require(d >= 0, "dims are non-negative");
            numel *= static_cast<uint64_t>(d);       // cannot wrap: checked by the parser
        }
        auto elem = ampgrad::io::safetensors_dtype_size(t.dtype);
        require(elem.has_value() && numel * *elem == t.end - t.begin, "bytes = numel x element size");
        covered = t.end;
    }
    require(covered == h.data_bytes, "the tensors cover the data section");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    ampgrad::io::Header h;
    try {
        h = ampgrad::io::parse_safetensors(data, size, "fuzz-input");
    } catch (const ampgrad::FormatError&) {
        return 0;                                    // rejected, as it should be
    }
    check_guarantees(h, size);
    std::string again = ampgrad::io::serialize_header(h.tensors, h.metadata);
    ampgrad::io::Header back = ampgrad::io::parse_header(again, h.data_bytes, "fuzz-roundtrip");
    require(back.tensors.size() == h.tensors.size() && back.metadata == h.metadata, "round trip keeps the header");
    for (size_t i = 0; i < h.tensors.size(); ++i)
        require(back.tensors[i].name == h.tensors[i].name && back.tensors[i].shape == h.tensors[i].shape &&
                    back.tensors[i].dtype == h.tensors[i].dtype && back.tensors[i].begin == h.tensors[i].begin,
                "round trip keeps every entry");
    return 0;
}
