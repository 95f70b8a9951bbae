// check_close.hpp: tolerance-aware tensor comparison for tests. On failure the message names
// the worst element (index, actual, expected), like llm.c's check_tensor.
//
//   check_close(y, expected, tol_for(kFloat16));        // doctest CHECK inside
//   Tolerance t = tol_for(kBFloat16, /*ops=*/8);        // looser for long reductions
#pragma once
#include <doctest/doctest.h>

#include <string>

#include "ampgrad/ampgrad.h"

namespace ampgrad::testing {

struct Tolerance {
    double atol;
    double rtol;
};

// Derived from the dtype's epsilon: a result rounded once has error <= eps/2 relative; `ops`
// scales it for values that pass through that many rounded stages.
Tolerance tol_for(DType dtype, double ops = 4.0);

// Returns an empty string if |actual - expected| <= atol + rtol*|expected| everywhere (and shapes
// match), else a description of the worst element.
std::string compare_tensors(const Tensor& actual, const Tensor& expected, Tolerance tol);

// The devices every test runs on: cpu, plus cuda:0 when built with CUDA and a GPU is present.
std::vector<Device> devices_under_test();

}  // namespace ampgrad::testing

#define CHECK_CLOSE(actual, expected, tol)                                                \
    do {                                                                                  \
        std::string ampgrad_cmp_ = ::ampgrad::testing::compare_tensors(actual, expected, tol); \
        CHECK_MESSAGE(ampgrad_cmp_.empty(), ampgrad_cmp_);                                \
    } while (0)
