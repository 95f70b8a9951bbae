// custom_fwd_test.cpp: custom_fwd / custom_bwd scopes: what they record, cast_inputs, autocast
// disabled inside a cast forward, and autocast restored inside backward (which the engine suspends),
// both as bare scopes and inside real autograd::Function forwards and backwards.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("custom_fwd without cast_inputs records the autocast state and changes nothing") {
    Tensor x = randn({2, 3});
    {
        amp::AutocastGuard autocast(kCPU, kFloat16);
        amp::CustomFwdScope fwd(kCPU, std::nullopt, {&x});
        CHECK(fwd.state().fwd_used_autocast);
        CHECK(fwd.state().dtype == kFloat16);
        CHECK(amp::is_autocast_enabled(kCPU));
        CHECK(x.dtype() == kFloat32);
    }
    amp::CustomFwdScope outside(kCPU);
    CHECK_FALSE(outside.state().fwd_used_autocast);
}

TEST_CASE("custom_fwd(cast_inputs=f32) casts eligible inputs and runs the forward with autocast off") {
    Tensor h = randn({2, 3}).to(kBFloat16), d = randn({3}, TensorOptions(kFloat64)), i = arange(3);
    Tensor undefined;
    amp::AutocastGuard autocast(kCPU);
    {
        amp::CustomFwdScope fwd(kCPU, kFloat32, {&h, &d, &i, &undefined});
        CHECK(h.dtype() == kFloat32);
        CHECK(d.dtype() == kFloat64);                                       // f64 and ints are not cast
        CHECK(i.dtype() == kInt64);
        CHECK_FALSE(fwd.state().fwd_used_autocast);
        CHECK_FALSE(amp::is_autocast_enabled(kCPU));
        CHECK(matmul(h, h.t()).dtype() == kFloat32);                        // no autocast inside
    }
    CHECK(amp::is_autocast_enabled(kCPU));
    Tensor outside = randn({2}).to(kBFloat16);
    {
        amp::AutocastGuard off(kCPU, std::nullopt, false);
        amp::CustomFwdScope fwd(kCPU, kFloat32, {&outside});                // outside autocast: nothing
        CHECK(outside.dtype() == kBFloat16);
    }
}

TEST_CASE("custom_bwd runs the backward under the forward's autocast state") {
    Tensor w = randn({3, 3}).requires_grad_(true);
    amp::AutocastFwdState state;
    DType dtype_in_backward = kFloat32;
    bool active_without_scope = true;
    Tensor y;
    {
        amp::AutocastGuard autocast(kCPU, kFloat16);
        amp::CustomFwdScope fwd(kCPU);
        state = fwd.state();
        y = w * 2.0;
    }
    y.register_hook([&](const Tensor& g) {
        active_without_scope = amp::autocast_active();                     // the engine suspends autocast
        amp::CustomBwdScope bwd(kCPU, state);
        dtype_in_backward = matmul(g, g).dtype();
        return Tensor();
    });
    y.sum().backward();
    CHECK_FALSE(active_without_scope);
    CHECK(dtype_in_backward == kFloat16);
    CHECK_FALSE(amp::is_autocast_enabled(kCPU));
    CHECK_FALSE(amp::autocast_active());
}

namespace {

DType g_backward_matmul_dtype = kFloat32;

// custom_fwd(cast_inputs=f32): y = x @ w always in f32, even inside a bf16 autocast region.
struct F32Matmul : autograd::Function<F32Matmul> {
    static tensor_list forward(autograd::AutogradContext* ctx, Tensor x, Tensor w) {
        amp::CustomFwdScope fwd(ctx, kCPU, kFloat32, {&x, &w});
        ctx->save_for_backward({x, w});
        return {matmul(x, w)};                                              // (M,N) f32
    }
    static tensor_list backward(autograd::AutogradContext* ctx, tensor_list g) {
        amp::CustomBwdScope bwd(ctx, kCPU);
        tensor_list s = ctx->get_saved_variables();
        Tensor dx = matmul(g[0], s[1].t());
        g_backward_matmul_dtype = dx.dtype();
        return {dx, matmul(s[0].t(), g[0])};
    }
};

// custom_fwd without cast_inputs: forward and backward both follow the caller's autocast.
struct AutocastMatmul : autograd::Function<AutocastMatmul> {
    static tensor_list forward(autograd::AutogradContext* ctx, Tensor x, Tensor w) {
        amp::CustomFwdScope fwd(ctx, kCPU);
        ctx->save_for_backward({x, w});
        return {matmul(x, w)};
    }
    static tensor_list backward(autograd::AutogradContext* ctx, tensor_list g) {
        amp::CustomBwdScope bwd(ctx, kCPU);
        tensor_list s = ctx->get_saved_variables();
        Tensor dx = matmul(g[0], s[1].t());
        g_backward_matmul_dtype = dx.dtype();
        return {dx, matmul(s[0].t(), g[0])};
    }
};

struct NoFwdScope : autograd::Function<NoFwdScope> {
    static tensor_list forward(autograd::AutogradContext*, Tensor x) { return {x * 2.0}; }
    static tensor_list backward(autograd::AutogradContext* ctx, tensor_list g) {
        amp::CustomBwdScope bwd(ctx, kCPU);
        return {g[0] * 2.0};
    }
};

}  // namespace

TEST_CASE("custom Function with cast_inputs=f32: f32 forward and backward inside a bf16 region") {
    manual_seed(4);
    Tensor x64 = randn({3, 4}, TensorOptions(kFloat64)), w64 = randn({4, 2}, TensorOptions(kFloat64));
    Tensor x = x64.to(kBFloat16).requires_grad_(true), w = w64.to(kFloat32).requires_grad_(true);
    Tensor y;
    {
        amp::AutocastGuard autocast(kCPU);
        y = F32Matmul::apply(x, w)[0];
    }
    CHECK(y.dtype() == kFloat32);
    y.sum().backward();
    CHECK(g_backward_matmul_dtype == kFloat32);                             // _fwd_used_autocast = false
    CHECK(x.grad().dtype() == kBFloat16);                                   // cast back to the input's dtype
    CHECK(w.grad().dtype() == kFloat32);
    Tensor ref = matmul(x.detach().to(kFloat64), w64);
    CHECK_CLOSE(y.to(kFloat64), ref, tol_for(kFloat32));
    CHECK_CLOSE(w.grad().to(kFloat64), matmul(x.detach().to(kFloat64).t(), ones({3, 2}, TensorOptions(kFloat64))),
                tol_for(kFloat32));
}

TEST_CASE("custom Function without cast_inputs: the backward runs under the forward's autocast dtype") {
    Tensor x = randn({3, 4}).requires_grad_(true), w = randn({4, 2}).requires_grad_(true);
    Tensor y;
    {
        amp::AutocastGuard autocast(kCPU, kFloat16);
        y = AutocastMatmul::apply(x, w)[0];
    }
    CHECK(y.dtype() == kFloat16);
    y.to(kFloat32).sum().backward();
    CHECK(g_backward_matmul_dtype == kFloat16);                             // custom_bwd re-entered f16
    CHECK(x.grad().dtype() == kFloat32);
    Tensor z = AutocastMatmul::apply(x, w)[0];                              // outside autocast: plain f32
    z.sum().backward();
    CHECK(z.dtype() == kFloat32);
    CHECK(g_backward_matmul_dtype == kFloat32);
}

TEST_CASE("custom_bwd without custom_fwd is a clear error") {
    Tensor x = randn({2}).requires_grad_(true);
    Tensor y = NoFwdScope::apply(x)[0];
    CHECK_THROWS_WITH_AS(y.sum().backward(), doctest::Contains("did not record its autocast state"), AmpError);
}
