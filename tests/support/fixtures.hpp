// fixtures.hpp: reading the PyTorch reference values written by tools/make_fixtures.py.
// One JSON file per case in tests/fixtures/: {"torch_version": ..., "tensors": {"x": {"shape": [2,3],
// "dtype": "f32", "data": [...]}, ...}, "params": {...}}. PyTorch is never needed to run tests.
#pragma once
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "ampgrad/ampgrad.h"

namespace ampgrad::testing {

struct Fixture {
    std::map<std::string, Tensor> tensors;
    nlohmann::json params;
    const Tensor& at(const std::string& name) const;
    double param(const std::string& name) const { return params.at(name).get<double>(); }
};

// Loads tests/fixtures/<name>.json (directory from $AMPGRAD_FIXTURES). Throws IOError if missing.
Fixture load_fixture(const std::string& name);

// The same dtype, shape and bytes (for round trips that must be exact).
bool same_bytes(const Tensor& a, const Tensor& b);
// A new empty directory under the system's temp dir, named <prefix>_<pid>_<n>.
std::string scratch_dir(const std::string& prefix);

}  // namespace ampgrad::testing
