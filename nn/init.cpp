// init.cpp: see init.hpp. Each random initialiser reserves its counters from the default
// generator exactly as the random factories do (autograd/ops/factory.cpp).
#include "nn/init.hpp"

#include "kernels/kernels.hpp"
#include "core/error.hpp"
#include "core/philox.hpp"

namespace ampgrad::nn::init {

namespace {
void check_floating(const char* fn, const Tensor& t) {
    if (!t.defined() || !is_floating(t.dtype()))
        throw DTypeError(fmt::format("{}: expected a floating tensor but got {}", fn, t.describe()));
}
}  // namespace

void uniform_(const Tensor& t, double lo, double hi) {
    check_floating("uniform_", t);
    GeneratorState g = get_rng_state();
    uint64_t offset = generator_reserve_elements(t.numel());
    kernels::random_uniform(t, g.seed, offset, lo, hi);
    t.bump_version();
}

void normal_(const Tensor& t, double mean, double std) {
    check_floating("normal_", t);
    GeneratorState g = get_rng_state();
    uint64_t offset = generator_reserve_elements(t.numel());
    kernels::random_normal(t, g.seed, offset, mean, std);
    t.bump_version();
}

void constant_(const Tensor& t, double value) {
    check_floating("constant_", t);
    kernels::fill(t, value);
    t.bump_version();
}

void zeros_(const Tensor& t) { constant_(t, 0.0); }

namespace {
thread_local int skip_init_depth = 0;   // SkipInitGuards alive on this thread (they nest)
}  // namespace

SkipInitGuard::SkipInitGuard() { ++skip_init_depth; }
SkipInitGuard::~SkipInitGuard() { --skip_init_depth; }
bool skipping_init() { return skip_init_depth > 0; }
void ones_(const Tensor& t) { constant_(t, 1.0); }

int64_t fan_in(const Tensor& weight) {
    if (weight.dim() < 2)
        throw ShapeError(fmt::format("fan_in: needs a weight of at least 2 dims, got {}", weight.describe()));
    return weight.numel() / weight.size(0);
}

}  // namespace ampgrad::nn::init
