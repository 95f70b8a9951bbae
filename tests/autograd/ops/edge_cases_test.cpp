// edge_cases_test.cpp: regression tests for the edge-case classes of issue 11 (docs/edge_cases.md):
// in-place writes over inf/NaN under autograd, 0-d tensors, zero-size dims, one-sided clamp,
// promotion with 0-d tensors, ignored-target cross-entropy. Each expected value is PyTorch's
// (the value is stated by the issue or follows from PyTorch's documented rule named beside it).
#include <doctest/doctest.h>

#include <cmath>
#include <limits>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace F = ampgrad::nn::functional;

namespace {
const double kInf = std::numeric_limits<double>::infinity();
std::vector<double> values(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }
TensorOptions f64() { return TensorOptions(kFloat64); }
TensorOptions f64_grad() { return TensorOptions(kFloat64).requires_grad(true); }
bool all_nan(const Tensor& t) {
    for (double v : values(t)) if (!std::isnan(v)) return false;
    return true;
}
}  // namespace

// ---- 1a: copy_/fill_/zero_ under autograd write the value, not self*0 + value ----

TEST_CASE("copy_ into a -inf padded buffer under autograd keeps the value and the padding") {
    Tensor s = tensor<double>({1, 2}, {1, 2}, f64_grad());
    Tensor buf = full({1, 3}, -kInf, f64());
    buf.narrow(1, 0, 2).copy_(s);                                  // torch: [1, 2, -inf]
    CHECK(values(buf) == std::vector<double>{1, 2, -kInf});
    buf.sum().backward();                                          // -inf.sum() backward: ones
    CHECK(values(s.grad()) == std::vector<double>{1, 1});
}

TEST_CASE("copy_ over NaN and inf, and into empty(), gives the source exactly") {
    Tensor s = tensor<float>({3, -4, 5}, {3}, TensorOptions(kFloat32).requires_grad(true));
    Tensor dst = tensor<float>({NAN, INFINITY, -INFINITY}) * 1.0;      // non-leaf
    dst.copy_(s * 2.0);
    CHECK(values(dst) == std::vector<double>{6, -8, 10});
    Tensor buf = empty({3});
    buf.copy_(s);
    CHECK(values(buf) == std::vector<double>{3, -4, 5});
    (dst * buf).sum().backward();                                  // d/ds (2s * s) = 4s
    CHECK(values(s.grad()) == std::vector<double>{12, -16, 20});
}

TEST_CASE("zero_ and fill_ of log(0) under autograd give the value, and a zero gradient") {
    Tensor x = tensor<double>({0, 1}, {2}, f64_grad());
    Tensor y = log(x);                                             // [-inf, 0]
    y.zero_();
    CHECK(values(y) == std::vector<double>{0, 0});                 // torch: [0, 0]
    y.sum().backward();                                            // 0 flows into log's 0/x: torch [nan, 0]
    CHECK(std::isnan(values(x.grad())[0]));
    CHECK(values(x.grad())[1] == 0.0);
    Tensor z = log(x.detach().requires_grad_(true));
    z.fill_(2.5);
    CHECK(values(z) == std::vector<double>{2.5, 2.5});
    Tensor w = x * 1.0;
    w.narrow(0, 0, 1).fill_(kInf);
    CHECK(values(w) == std::vector<double>{kInf, 1});
}

// ---- 1b: 0-d tensors: every reduction takes dim 0 / -1 (PyTorch's maybe_wrap_dim) ----

TEST_CASE("reductions of a 0-d tensor over dim 0 or -1 return the element") {
    for (int64_t dim : {0, -1}) {
        CAPTURE(dim);
        Tensor x = scalar_tensor(3.0, f64_grad());
        CHECK(sum(x, {dim}).item<double>() == 3.0);
        CHECK(sum(x, {dim}, true).dim() == 0);                      // keepdim of a 0-d is 0-d
        CHECK(mean(x, {dim}).item<double>() == 3.0);
        CHECK(amax(x, {dim}).item<double>() == 3.0);
        CHECK(logsumexp(x, dim).item<double>() == 3.0);
        CHECK(logsumexp(x, dim, true).dim() == 0);
        CHECK(std::isnan(var(x, dim).item<double>()));               // unbiased, n = 1: 0/0
        CHECK(var(x, dim, false).item<double>() == 0.0);
        Tensor total = sum(x, {dim}) + mean(x, {dim}) + amax(x, {dim}) + logsumexp(x, dim) + var(x, dim, false);
        total.backward();
        CHECK(x.grad().item<double>() == doctest::Approx(4.0));      // 1 + 1 + 1 + 1 + 0
    }
    Tensor x = scalar_tensor(3.0, f64());
    CHECK_THROWS_AS(sum(x, {1}), IndexError);
    CHECK_THROWS_AS(amax(x, {-2}), IndexError);
    CHECK_THROWS_AS(sum(x, {0, -1}), ValueError);                   // torch: dim 0 appears multiple times
}

TEST_CASE("softmax and log_softmax of a 0-d tensor: forward, backward and create_graph backward") {
    for (bool log_form : {false, true}) {
        CAPTURE(log_form);
        Tensor x = scalar_tensor(0.7, f64_grad());
        Tensor y = log_form ? F::log_softmax(x, 0) : F::softmax(x, -1);
        CHECK(y.dim() == 0);
        CHECK(y.item<double>() == (log_form ? 0.0 : 1.0));
        tensor_list g = autograd::grad({y * y}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true);
        CHECK(g[0].item<double>() == 0.0);                           // y is constant in x
        g[0].backward();
        CHECK(x.grad().item<double>() == 0.0);
    }
}

TEST_CASE("view ops on a 0-d tensor: PyTorch's errors and accepted dims") {
    Tensor a = scalar_tensor(1.0);
    CHECK_THROWS_AS(cat({a, a}, 0), ShapeError);                     // zero-dimensional ... cannot be concatenated
    CHECK_THROWS_AS(transpose(a, 0, 1), IndexError);
    CHECK_THROWS_AS(squeeze(a, 1), IndexError);
    CHECK_THROWS_AS(squeeze(a, -2), IndexError);
    CHECK_THROWS_AS(narrow(a, 0, 0, 1), IndexError);
    CHECK_THROWS_AS(split(a, 1, 0), IndexError);
    CHECK(transpose(a, 0, -1).dim() == 0);
    CHECK(squeeze(a, -1).dim() == 0);
    CHECK(stack({a, a}, 0).sizes() == Shape{2});
}

// ---- 1c: zero-size dims: PyTorch returns zeros / empties, never recurses or throws ----

TEST_CASE("linear and matmul with a zero-size batch or inner dim return zeros, forward and backward") {
    Tensor y = linear(zeros({2, 0, 4}), ones({5, 4}));
    CHECK(y.sizes() == Shape{2, 0, 5});
    Tensor m = matmul(zeros({2, 0, 3, 4}), ones({2, 0, 4, 5}));
    CHECK(m.sizes() == Shape{2, 0, 3, 5});
    Tensor a = zeros({2, 3, 0}, f64_grad()), b = zeros({0, 4}, f64_grad());
    Tensor c = matmul(a, b);                                         // inner size 0: zeros (2,3,4)
    CHECK(c.sizes() == Shape{2, 3, 4});
    CHECK(values(c) == std::vector<double>(24, 0.0));
    c.sum().backward();
    CHECK(a.grad().sizes() == Shape{2, 3, 0});
    CHECK(b.grad().sizes() == Shape{0, 4});
    Tensor x = zeros({3, 0}, f64_grad()), w = ones({2, 0}, f64_grad()), bias = ones({2}, f64_grad());
    Tensor l = linear(x, w, bias);                                // = bias broadcast
    CHECK(values(l) == std::vector<double>(6, 1.0));
    l.sum().backward();
    CHECK(x.grad().sizes() == Shape{3, 0});
    CHECK(w.grad().sizes() == Shape{2, 0});
    CHECK(values(bias.grad()) == std::vector<double>{3, 3});
    Tensor x0 = zeros({0, 3}, f64_grad()), w0 = ones({2, 3}, f64_grad());
    linear(x0, w0).sum().backward();                              // no rows: weight gradient zeros
    CHECK(values(w0.grad()) == std::vector<double>(6, 0.0));
    Tensor bm = bmm(zeros({0, 2, 3}), zeros({0, 3, 4}));
    CHECK(bm.sizes() == Shape{0, 2, 4});
}

TEST_CASE("split along a size-0 dim returns one empty piece") {
    tensor_list parts = split(zeros({2, 0}), 3, 1);
    REQUIRE(parts.size() == 1);
    CHECK(parts[0].sizes() == Shape{2, 0});
    CHECK(split(zeros({0}), 1, 0).size() == 1);
}

TEST_CASE("reductions over empty dims: var NaN, logsumexp -inf, amax empty or an error") {
    Tensor e = zeros({2, 0}, f64_grad());
    CHECK(all_nan(var(e, 1)));                                       // torch: [nan, nan]
    CHECK(all_nan(var(e, 1, false)));
    CHECK(var(e, 1).sizes() == Shape{2});
    Tensor lse = logsumexp(e, 1);
    CHECK(values(lse) == std::vector<double>{-kInf, -kInf});
    CHECK(logsumexp(e, 0).sizes() == Shape{0});
    CHECK(logsumexp(zeros({0}), 0).item<double>() == -kInf);
    Tensor am = amax(e, {0});                                        // reduces size 2: empty result
    CHECK(am.sizes() == Shape{0});
    CHECK(amax(e, {0}, true).sizes() == Shape{1, 0});
    CHECK_THROWS_AS(amax(e, {1}), IndexError);                       // torch: non-zero size expected
    CHECK_THROWS_AS(max(e), IndexError);
    CHECK(all_nan(mean(e, {1})));
    CHECK(values(sum(e, {1})) == std::vector<double>{0, 0});
    (lse.sum() + am.sum() + var(e, 0).sum()).backward();
    CHECK(e.grad().sizes() == Shape{2, 0});
}

// Issue 23: PyTorch's zero_numel_check_dims (ReduceOps.cpp) raises for a reduced dim of size 0 even
// when the result is empty, e.g. torch.amax(torch.zeros(0, 0), 1): "Expected reduction dim 1 to have
// non-zero size". amax/amin used to return an empty tensor there (and amin an inf where it was not).
TEST_CASE("amax/amin/max/min over a zero-size dim raise IndexError, even when the result is empty") {
    Tensor e00 = zeros({0, 0});
    CHECK_THROWS_WITH_AS(amax(e00, {1}), doctest::Contains("amax: expected reduction dim 1 to have non-zero size"),
                         IndexError);
    CHECK_THROWS_WITH_AS(amin(e00, {0}), doctest::Contains("amin: expected reduction dim 0"), IndexError);
    CHECK_THROWS_AS(amax(zeros({3, 0, 0}), {1}, true), IndexError);
    CHECK_THROWS_AS(amin(zeros({0, 3}), {0}), IndexError);               // a non-empty result: (3)
    CHECK_THROWS_AS(amin(zeros({2, 0}), {}), IndexError);                    // every dim
    CHECK_THROWS_AS(max(e00, 1), IndexError);
    CHECK_THROWS_AS(argmax(e00, 0), IndexError);
    CHECK_THROWS_AS(min(zeros({0})), IndexError);
    // Reducing only non-empty dims of an empty tensor is fine, as in PyTorch: an empty result.
    CHECK(amax(zeros({2, 0}), {0}).sizes() == Shape{0});
    CHECK(amin(zeros({2, 0}), {0}, true).sizes() == Shape{1, 0});
    CHECK(max(zeros({2, 0}), 0).first.sizes() == Shape{0});
}

// Issue 23: PyTorch 2.15's CPU gelu(+inf) is NaN; ours is +inf, the limit of x Phi(x), kept on purpose
// (docs/edge_cases.md, tools/difftest/known_diffs.py "gelu: +inf input gives +inf"). Contiguous runs
// longer than a SIMD packet take cpu/vec_math's path, a single element the scalar loop: both checked.
TEST_CASE("gelu(+inf) is +inf, exact and tanh forms, f32 and f64, scalar and vectorised paths") {
    for (DType dt : {kFloat32, kFloat64}) {
        for (bool tanh_form : {false, true}) {
            CAPTURE(tanh_form);
            Tensor one = full({1}, kInf, TensorOptions(dt));
            CHECK(values(gelu(one, tanh_form)) == std::vector<double>{kInf});
            Tensor many = full({37}, kInf, TensorOptions(dt));
            for (double v : values(gelu(many, tanh_form))) CHECK(v == kInf);
        }
    }
}

// ---- 1d: one-sided clamp leaves +-inf alone; amax of -inf is -inf ----

TEST_CASE("one-sided clamp and clamp_ keep infinities in every floating dtype") {
    for (DType dt : {kFloat64, kFloat32, kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor x = tensor<double>({kInf, -kInf, 1.0}, {3}, f64()).to(dt);
        CHECK(values(clamp(x, 0.0, std::nullopt)) == std::vector<double>{kInf, 0, 1});
        CHECK(values(clamp(x, std::nullopt, 2.0)) == std::vector<double>{2, -kInf, 1});
        Tensor y = x.clone();
        y.clamp_(std::nullopt, 0.5);
        CHECK(values(y) == std::vector<double>{0.5, -kInf, 0.5});
        CHECK(values(amax(x.narrow(0, 1, 1), {0})) == std::vector<double>{-kInf});
        CHECK(values(relu(x)) == std::vector<double>{kInf, 0, 1});
    }
    Fixture f = load_fixture("edge_losses");                         // torch: inf, not -inf
    Tensor bce = F::binary_cross_entropy_with_logits(full({1}, kInf), full({1}, 0.5));
    CHECK_CLOSE(bce, f.at("bce_inf").to(kFloat32), tol_for(kFloat32));
    CHECK(values(bce) == std::vector<double>{kInf});
}

TEST_CASE("clamp of an integer tensor: integral bounds stay integer, a fractional bound promotes to f32") {
    Tensor i = tensor<int64_t>({1, 2, 3});
    CHECK(clamp(i, 1.0, 2.0).dtype() == kInt64);
    Tensor c = clamp(i, 1.5, std::nullopt);                          // torch.clamp(int64, 1.5) -> float32
    CHECK(c.dtype() == kFloat32);
    CHECK(values(c) == std::vector<double>{1.5, 2, 3});
    CHECK(clamp(i, std::nullopt, 2.5).dtype() == kFloat32);
    CHECK_THROWS_AS(i.clamp_(1.5, std::nullopt), DTypeError);       // can't be cast to the output type
    CHECK(values(i) == std::vector<double>{1, 2, 3});
}

// ---- 1e: promotion with a floating 0-d tensor uses that tensor's dtype ----

TEST_CASE("int and bool tensors combined with a floating 0-d tensor take its dtype") {
    Fixture f = load_fixture("edge_promotion_int_0d");
    Tensor a = tensor<int64_t>({1, 2, 3});
    Tensor s = scalar_tensor(0.1, f64_grad());
    Tensor y = a * s;                                                // torch: float64
    CHECK(y.dtype() == kFloat64);
    CHECK_CLOSE(y, f.at("y"), tol_for(kFloat64));
    y.sum().backward();
    CHECK(s.grad().dtype() == kFloat64);
    CHECK(s.grad().item<double>() == 6.0);                          // exact in f64
    Tensor h = a + scalar_tensor(0.1, TensorOptions(kFloat16));      // torch: float16
    CHECK(h.dtype() == kFloat16);
    CHECK_CLOSE(h, f.at("h"), tol_for(kFloat16, 0));
    CHECK((a + scalar_tensor(0.5, TensorOptions(kBFloat16))).dtype() == kBFloat16);
    CHECK((ones({2}, TensorOptions(kBool)) * scalar_tensor(2.0, f64())).dtype() == kFloat64);
    CHECK((ones({2}, TensorOptions(kBool)) + scalar_tensor(2.0, TensorOptions(kInt32))).dtype() == kInt32);
    // unchanged: a 0-d of the same or a lower category never promotes; Python scalars are f32
    CHECK((ones({2}, TensorOptions(kFloat16)) * scalar_tensor(2.0, f64())).dtype() == kFloat16);
    CHECK((tensor<int32_t>({1, 2}) + scalar_tensor(2.0, TensorOptions(kInt64))).dtype() == kInt32);
    CHECK((a * 0.5).dtype() == kFloat32);
    CHECK((scalar_tensor(1.0, f64()) + scalar_tensor(1.0, TensorOptions(kFloat32))).dtype() == kFloat64);
}

// ---- 1f: cross_entropy with every target ignored: loss NaN, gradients 0 to any order ----

TEST_CASE("cross_entropy double backward with every target ignored is 0, not NaN") {
    Fixture f = load_fixture("edge_losses");
    Tensor logits = randn({3, 4}, f64_grad());
    Tensor targets = full({3}, -100.0, TensorOptions(kInt64));
    Tensor ce = F::cross_entropy(logits, targets);
    CHECK(std::isnan(ce.item<double>()));                            // torch: nan
    tensor_list g = autograd::grad({ce}, {logits}, {}, true, true);
    CHECK_CLOSE(g[0], f.at("ce_grad"), tol_for(kFloat64));
    tensor_list gg = autograd::grad({(g[0] * (g[0].detach() + 1.0)).sum()}, {logits});
    CHECK_CLOSE(gg[0], f.at("ce_double_grad"), tol_for(kFloat64));
    Tensor l2 = randn({3, 4}, f64_grad());
    F::cross_entropy(l2, targets).backward();                        // the fused (first-order) path
    CHECK(values(l2.grad()) == std::vector<double>(12, 0.0));
}

TEST_CASE("other ops with empty dims: softmax, cross_entropy, cat, norm, mean, max(dim)") {
    Tensor e = zeros({2, 0}, f64_grad());
    CHECK(F::softmax(e, 1).sizes() == Shape{2, 0});
    CHECK(F::log_softmax(zeros({0, 3}), 1).sizes() == Shape{0, 3});
    Tensor logits = zeros({0, 3}, f64_grad());
    Tensor ce = F::cross_entropy(logits, zeros({0}, TensorOptions(kInt64)));
    CHECK(std::isnan(ce.item<double>()));                            // torch: nan (mean of nothing)
    ce.backward();
    CHECK(logits.grad().sizes() == Shape{0, 3});
    CHECK(values(cat({zeros({2, 0}), ones({2, 3})}, 1)) == std::vector<double>(6, 1.0));
    CHECK(norm(e).item<double>() == 0.0);
    CHECK(std::isnan(mean(e).item<double>()));
    CHECK(max(zeros({3, 0}), 0, false).first.sizes() == Shape{0});
    CHECK_THROWS_AS(max(zeros({3, 0}), 1, false), IndexError);
    Tensor s = scalar_tensor(2.0, f64_grad());
    CHECK(max(s, 0, false).second.item<int64_t>() == 0);
    CHECK(argmax(s, -1).item<int64_t>() == 0);
}
