// fixtures.cpp: see fixtures.hpp.
#include "tests/support/fixtures.hpp"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace ampgrad::testing {

const Tensor& Fixture::at(const std::string& name) const {
    auto it = tensors.find(name);
    if (it == tensors.end()) throw IOError(fmt::format("fixture has no tensor named '{}'", name));
    return it->second;
}

namespace {
DType parse_dtype(const std::string& s) {
    if (s == "f32") return kFloat32;
    if (s == "f64") return kFloat64;
    if (s == "f16") return kFloat16;
    if (s == "bf16") return kBFloat16;
    if (s == "i64") return kInt64;
    if (s == "i32") return kInt32;
    if (s == "bool") return kBool;
    throw IOError(fmt::format("fixture: unknown dtype '{}'", s));
}
}  // namespace

Fixture load_fixture(const std::string& name) {
    const char* dir = std::getenv("AMPGRAD_FIXTURES");
    std::string path = std::string(dir ? dir : "tests/fixtures") + "/" + name + ".json";
    std::ifstream in(path);
    if (!in) throw IOError(fmt::format("fixture: cannot open {} (run tools/make_fixtures.py)", path));
    nlohmann::json j = nlohmann::json::parse(in);
    Fixture f;
    f.params = j.value("params", nlohmann::json::object());
    for (auto& [key, t] : j.at("tensors").items()) {
        Shape shape = t.at("shape").get<Shape>();
        DType dt = parse_dtype(t.at("dtype").get<std::string>());
        std::vector<double> data;
        for (const auto& v : t.at("data")) {
            if (v.is_string()) {             // "nan", "inf", "-inf"
                std::string s = v.get<std::string>();
                data.push_back(s == "nan" ? NAN : (s == "inf" ? INFINITY : -INFINITY));
            } else {
                data.push_back(v.get<double>());
            }
        }
        f.tensors[key] = tensor(data, shape, TensorOptions(kFloat64)).to(dt);
    }
    return f;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
    if (a.dtype() != b.dtype() || a.sizes() != b.sizes()) return false;
    Tensor x = a.contiguous(), y = b.contiguous();
    return std::memcmp(x.raw_data(), y.raw_data(), static_cast<size_t>(x.numel()) * x.element_size()) == 0;
}

std::string scratch_dir(const std::string& prefix) {
    static int n = 0;
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / fmt::format("{}_{}_{}", prefix, ::getpid(), n++);
    std::filesystem::create_directories(dir);
    return dir.string();
}

}  // namespace ampgrad::testing
