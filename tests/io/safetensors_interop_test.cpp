// safetensors_interop_test.cpp: files go both ways between ampgrad and the Python `safetensors`
// package (its numpy API and deserialize; no PyTorch). tests/io/safetensors_interop.py holds the
// Python side. The interpreter is $AMPGRAD_PYTHON (scripts/setup.sh points it at a venv with
// numpy and safetensors), else `python3`; if neither can import both, this test fails.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

#include "ampgrad/ampgrad.h"
#include "io/safetensors.hpp"

using namespace ampgrad;
namespace fs = std::filesystem;

namespace {

fs::path scratch_dir() {
    fs::path dir = fs::temp_directory_path() / ("ampgrad_interop_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    return dir;
}

// $AMPGRAD_PYTHON, else the venv scripts/setup.sh made in this build dir, else python3.
std::string python() {
    if (const char* py = std::getenv("AMPGRAD_PYTHON"); py && *py) return py;
    if (const char* build = std::getenv("AMPGRAD_BUILD_ROOT")) {
        fs::path venv = fs::path(build) / "python-venv" / "bin" / "python3";
        if (fs::exists(venv)) return venv.string();
    }
    return "python3";
}

// Runs the Python side; returns its exit status and puts its output in `log`.
int run_python(const std::string& mode, const fs::path& file, std::string& log) {
    const char* root = std::getenv("AMPGRAD_SOURCE_ROOT");
    REQUIRE_MESSAGE(root, "AMPGRAD_SOURCE_ROOT is not set (run through meson test)");
    fs::path out = file.string() + ".log";
    std::string cmd = fmt::format("'{}' '{}/tests/io/safetensors_interop.py' {} '{}' > '{}' 2>&1", python(), root, mode,
                                  file.string(), out.string());
    int status = std::system(cmd.c_str());
    std::ifstream in(out);
    std::stringstream ss;
    ss << in.rdbuf();
    log = cmd + "\n" + ss.str();
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

template <typename T>
Tensor values(std::vector<T> v, Shape shape, DType dtype) {
    return tensor(v, shape, TensorOptions(dtype));
}

}  // namespace

TEST_CASE("ampgrad writes, Python safetensors reads: every dtype, metadata, tied weights, alignment") {
    fs::path dir = scratch_dir();
    std::vector<double> f64, f32;
    for (int i = 0; i < 6; ++i) { f64.push_back(i * 0.125 - 0.25); f32.push_back(i * 0.5 - 1.0); }
    nn::NamedTensors t;
    t.insert("f64", values(f64, {2, 3}, kFloat64));
    Tensor f32_tensor = values(f32, {3, 2}, kFloat32);
    t.insert("f32", f32_tensor);
    t.insert("f32_alias", f32_tensor.detach());                     // a tie: written once
    t.insert("specials", values(std::vector<float>{NAN, INFINITY, -INFINITY, -0.0f, std::ldexp(1.0f, -149)}, {5},
                                kFloat32));
    t.insert("f16", values(std::vector<float>{1.0f, -2.5f, 65504.0f, std::ldexp(1.0f, -24)}, {4}, kFloat16));
    t.insert("bf16", values(std::vector<float>{1.0f, -2.5f, INFINITY}, {3}, kBFloat16));
    t.insert("i64", values(std::vector<int64_t>{-(int64_t{1} << 62), 3, (int64_t{1} << 62) + 1, -1}, {2, 2}, kInt64));
    t.insert("i32", values(std::vector<int64_t>{INT32_MIN, -1, 0, 7, INT32_MAX}, {5}, kInt32));
    t.insert("bool", values(std::vector<double>{1, 0, 0, 1}, {2, 2}, kBool));
    t.insert("empty", zeros({0, 3}));
    t.insert("scalar", scalar_tensor(3.5, TensorOptions(kFloat64)));
    fs::path file = dir / "from_ampgrad.safetensors";
    io::save_safetensors(file.string(), t, {{"framework", "ampgrad"}, {"note", "h\xc3\xa9llo"}});

    std::string log;
    int status = run_python("check", file, log);
    CHECK_MESSAGE(status == 0, log);
    fs::remove_all(dir);
}

TEST_CASE("Python safetensors writes, ampgrad reads") {
    fs::path dir = scratch_dir();
    fs::path file = dir / "from_python.safetensors";
    std::string log;
    int status = run_python("write", file, log);
    REQUIRE_MESSAGE(status == 0, log);

    io::SafetensorsFile f = io::load_safetensors(file.string());
    CHECK(f.metadata.at("writer") == "python");
    CHECK(f.tied.empty());
    CHECK(f.tensors.size() == 8);
    const Tensor& a = f.tensors.at("a_f64");
    CHECK(a.dtype() == kFloat64);
    CHECK(a.to_vector<double>() == std::vector<double>{-1.0, -0.75, -0.5, -0.25, 0.0, 0.25});
    const Tensor& b = f.tensors.at("b_f32");
    CHECK(b.sizes() == Shape{2, 3, 4});
    CHECK(b.to_vector<float>().front() == -1.0f);
    CHECK(b.to_vector<float>().back() == 1.0f);
    auto c = f.tensors.at("c_f16").to_vector<float>();
    CHECK(c == std::vector<float>{0.5f, -1.5f, std::ldexp(1.0f, -24), 65504.0f, -0.0f});
    CHECK(std::signbit(c[4]));
    CHECK(f.tensors.at("d_i64").to_vector<int64_t>() ==
          std::vector<int64_t>{-(int64_t{1} << 62), (int64_t{1} << 62) + 1, 5, -7});
    CHECK(f.tensors.at("e_i32").to_vector<int32_t>() == std::vector<int32_t>{INT32_MIN, INT32_MAX, 3});
    CHECK(f.tensors.at("f_bool").dtype() == kBool);
    CHECK(f.tensors.at("f_bool").to_vector<double>() == std::vector<double>{1, 0, 1});
    CHECK(f.tensors.at("g_scalar").dim() == 0);
    CHECK(f.tensors.at("g_scalar").item<float>() == 2.5f);
    CHECK(f.tensors.at("h_empty").sizes() == Shape{3, 0});
    fs::remove_all(dir);
}
