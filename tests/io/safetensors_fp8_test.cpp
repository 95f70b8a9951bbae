// safetensors_fp8_test.cpp: the one-byte storage dtypes in safetensors files: fp8 under PyTorch's and
// the format's names F8_E4M3 / F8_E5M2, one byte per element, the codes back bit for bit (NaN
// included); u8 (NF4's packed codes) as "U8".
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "ampgrad/ampgrad.h"
#include "io/safetensors.hpp"

using namespace ampgrad;
namespace fs = std::filesystem;

TEST_CASE("safetensors: float8 tensors round trip as F8_E4M3 and F8_E5M2") {
    fs::path dir = fs::temp_directory_path() / fmt::format("ampgrad_st_fp8_{}", ::getpid());
    fs::create_directories(dir);
    Tensor e4m3 = make_empty({2, 128}, kFloat8_e4m3fn, Device(kCPU));            // every code, twice
    for (int i = 0; i < 256; ++i) static_cast<uint8_t*>(e4m3.raw_data())[i] = static_cast<uint8_t>(i);
    Tensor e5m2 = tensor(std::vector<float>{1.5f, -57344.0f, 1e-5f, INFINITY}).to(kFloat8_e5m2);
    nn::NamedTensors t;
    t.insert("w", e4m3);
    t.insert("g", e5m2);
    t.insert("w_t", e4m3.t());                                                   // strided: written dense
    const std::string path = (dir / "fp8.safetensors").string();
    io::save_safetensors(path, t);

    io::Header h = io::read_safetensors_header(path);
    REQUIRE(h.tensors.size() == 3);
    CHECK(h.tensors[0].dtype == "F8_E4M3");
    CHECK(h.tensors[1].dtype == "F8_E5M2");
    CHECK(h.tensors[0].end - h.tensors[0].begin == 256);                         // one byte an element
    io::SafetensorsFile f = io::load_safetensors(path);
    for (const auto& [name, want] : t) {
        CAPTURE(name);
        const Tensor& got = f.tensors.at(name);
        CHECK(got.dtype() == want.dtype());
        CHECK(got.sizes() == want.sizes());
        Tensor dense = want.contiguous();
        CHECK(std::memcmp(got.raw_data(), dense.raw_data(), static_cast<size_t>(got.numel())) == 0);
    }
    fs::remove_all(dir);
}

TEST_CASE("safetensors: u8 tensors (NF4's packed codes) round trip as U8") {
    fs::path dir = fs::temp_directory_path() / fmt::format("ampgrad_st_u8_{}", ::getpid());
    fs::create_directories(dir);
    const NF4Tensor w4 = quantize_nf4(randn({4, 64}));
    nn::NamedTensors t;
    t.insert("codes", w4.codes);                                                 // (128) u8
    const std::string path = (dir / "u8.safetensors").string();
    io::save_safetensors(path, t);
    io::Header h = io::read_safetensors_header(path);
    REQUIRE(h.tensors.size() == 1);
    CHECK(h.tensors[0].dtype == "U8");
    CHECK(h.tensors[0].end - h.tensors[0].begin == 128);
    io::SafetensorsFile f = io::load_safetensors(path);
    const Tensor& got = f.tensors.at("codes");
    CHECK(got.dtype() == kUInt8);
    CHECK(std::memcmp(got.raw_data(), w4.codes.raw_data(), 128) == 0);
    fs::remove_all(dir);
}
