// edge_sweep_test.cpp: regression tests for the mismatch classes of the 20k-case differential run
// against PyTorch (tools/difftest, seed 11) that were fixed in the composite ops: var's gradient at
// n - correction <= 0, min() with NaN, prod with NaN/inf, the inf-norm at NaN, linear with a
// broadcast bias, cross_entropy with NaN in ignored rows, attention rows whose scores are all -inf,
// and binary_cross_entropy's gradients at p = 0 and 1; then the classes of the seed 12-16 runs
// (binary_cross_entropy's second derivatives, scalars rounded to f16 by clamp and x + s, layer_norm's
// constant rows, f16 attention and norm). Expected values come from fixtures written by
// tools/fixtures/edge_sweep.py (torch 2.15.0).
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
namespace F = ampgrad::nn::functional;

namespace {
// equal values, NaN == NaN (the fixtures hold NaN on purpose); close within 1e-12 (f64) or 1e-6 (f32)
// relative
bool same_values(const Tensor& a, const Tensor& b) {
    if (a.sizes() != b.sizes()) return false;
    const double rel = b.dtype() == kFloat64 ? 1e-12 : 1e-6;
    std::vector<double> x = a.to(kFloat64).to_vector<double>(), y = b.to(kFloat64).to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i) {
        bool both_nan = std::isnan(x[i]) && std::isnan(y[i]);
        bool close = x[i] == y[i] || std::abs(x[i] - y[i]) <= rel * std::abs(y[i]);
        if (!both_nan && !close) return false;
    }
    return true;
}
Tensor leaf(const Fixture& f, const std::string& name) { return f.at(name).clone().requires_grad_(true); }
}  // namespace

TEST_CASE("var: PyTorch's gradient when n - correction <= 0 over the whole tensor, and no second gradient") {
    Fixture f = load_fixture("edge_sweep_var");
    struct Case { const char* tag; Shape dims; double correction; };
    for (Case c : {Case{"scalar", {0}, 1.0}, Case{"scalar_nan", {-1}, 1.0}, Case{"scalar_c2", {}, 2.0},
                   Case{"whole_c3", {}, 3.0}, Case{"whole_same", {}, 3.0}}) {
        CAPTURE(c.tag);
        const std::string tag = c.tag;
        Tensor x = leaf(f, "x_" + tag);
        Tensor y = var(x, c.dims, c.correction);
        CHECK(same_values(y, f.at("y_" + tag)));
        tensor_list g = autograd::grad({y}, {x}, {full_like(y, -0.5)}, /*retain_graph=*/true, /*create_graph=*/true);
        CHECK(same_values(g[0], f.at("dx_" + tag)));               // nan where x == mean(x), else inf * g
        CHECK_FALSE(g[0].requires_grad());                        // a constant factor: no second gradient
    }
}

TEST_CASE("min() with NaN shares the gradient among the NaN elements, as max()") {
    Fixture f = load_fixture("edge_sweep_reduce");
    Tensor x = leaf(f, "x");
    min(x).backward();
    CHECK(same_values(x.grad(), f.at("dmin")));                    // [0, .5, 0, .5, 0]
    Tensor s = scalar_tensor(std::nan(""), TensorOptions(kFloat64).requires_grad(true));
    min(s).backward();
    CHECK(s.grad().item<double>() == 1.0);
}

TEST_CASE("prod: result / x without zeros gives NaN at NaN and inf inputs, as PyTorch; exact products with a zero") {
    Fixture f = load_fixture("edge_sweep_reduce");
    for (bool create_graph : {false, true}) {
        CAPTURE(create_graph);
        Tensor p = leaf(f, "p");
        CHECK(same_values(autograd::grad({prod(p)}, {p}, {}, true, create_graph)[0], f.at("dprod_nan")));
        Tensor c = leaf(f, "c");
        Tensor y = prod(c, 1);
        CHECK(same_values(autograd::grad({y}, {c}, {ones_like(y)}, true, create_graph)[0], f.at("dprod_inf")));
        Tensor z = leaf(f, "z");
        CHECK(same_values(autograd::grad({prod(z)}, {z}, {}, true, create_graph)[0], f.at("dprod_zero")));
    }
}

// PyTorch 2.15's values (prod_backward in FunctionsManual.cpp): the whole product with two zeros or
// more, without create_graph, has gradient 0 (no cumprod, so the inf beside the zeros never makes a
// NaN); with create_graph, and over a dim always, the products of the others (inf * 0 = NaN).
TEST_CASE("prod: two zeros beside an inf: the whole product's gradient is 0 without create_graph, as PyTorch") {
    const std::vector<float> values = {INFINITY, 0.0f, -0.0f, 2.0f};
    const Tensor others = tensor(std::vector<float>{0.0f, NAN, NAN, NAN}, {4});
    for (bool create_graph : {false, true}) {
        CAPTURE(create_graph);
        Tensor x = tensor(values, {4}).requires_grad_(true);
        Tensor whole = autograd::grad({prod(x)}, {x}, {}, true, create_graph)[0];
        CHECK(same_values(whole, create_graph ? others : zeros({4})));
        Tensor r = tensor(values, {1, 4}).requires_grad_(true);
        Tensor y = prod(r, 1);
        Tensor by_dim = autograd::grad({y}, {r}, {ones_like(y)}, true, create_graph)[0];
        CHECK(same_values(by_dim, others.view({1, 4})));
    }
}

TEST_CASE("norm: sgn(NaN) is 0 in the inf-, -inf- and 1-norm gradients, as PyTorch") {
    Fixture f = load_fixture("edge_sweep_reduce");
    Tensor n1 = leaf(f, "n");
    norm(n1, -INFINITY, {0}, true).sum().backward();
    CHECK(same_values(n1.grad(), f.at("dnorm_minf")));
    Tensor n2 = leaf(f, "n");
    norm(n2, INFINITY).backward();
    CHECK(same_values(n2.grad(), f.at("dnorm_inf")));
    Tensor n3 = leaf(f, "n");
    norm(n3, 1.0).backward();
    CHECK(same_values(n3.grad(), f.at("dnorm_1")));
}

TEST_CASE("linear accepts a bias that broadcasts to the output, as PyTorch; others still raise") {
    Fixture f = load_fixture("edge_sweep_linear_ce");
    Tensor x = leaf(f, "x"), w = leaf(f, "w"), b = leaf(f, "b");  // (2,1,3) (2,3) (1)
    Tensor y = linear(x, w, b);
    CHECK(same_values(y, f.at("y")));
    y.sum().backward();
    CHECK(same_values(x.grad(), f.at("dx")));
    CHECK(same_values(w.grad(), f.at("dw")));
    CHECK(same_values(b.grad(), f.at("db")));
    CHECK_THROWS_AS(linear(x, w, zeros({3}, TensorOptions(kFloat64))), ShapeError);
    CHECK_THROWS_AS(linear(x, w, zeros({4, 1, 1, 2}, TensorOptions(kFloat64))), ShapeError);   // would grow y
}

TEST_CASE("cross_entropy: a NaN class weight or logit in an ignored row, as PyTorch") {
    Fixture f = load_fixture("edge_sweep_linear_ce");
    Tensor targets = f.at("targets");
    Tensor logits = leaf(f, "logits");
    F::CrossEntropyOptions o;
    o.weight = f.at("weight");
    o.reduction = F::Reduction::kNone;
    Tensor ce_w = F::cross_entropy(logits.narrow(0, 0, 2), targets.narrow(0, 0, 2), o);
    CHECK(same_values(ce_w, f.at("ce_w")));
    ce_w.sum().backward();
    CHECK(same_values(logits.grad(), f.at("dce_w")));              // the ignored row: 0, not 0 * NaN
    Tensor logits2 = leaf(f, "logits");
    Tensor ce = F::cross_entropy(logits2, targets);                // the fused kernel
    CHECK(same_values(ce, f.at("ce")));
    ce.backward();
    CHECK(same_values(logits2.grad(), f.at("dce")));               // NaN in the ignored NaN row, as torch
    Tensor logits3 = leaf(f, "logits");                            // the fused op's create_graph backward
    tensor_list g = autograd::grad({F::cross_entropy(logits3, targets)}, {logits3}, {}, true, /*create_graph=*/true);
    CHECK(same_values(g[0], f.at("dce")));
}

TEST_CASE("scaled_dot_product_attention: a row of all -inf scores gives 0 without a mask, as PyTorch's math path") {
    Fixture f = load_fixture("edge_sweep_attention");
    // 3-d: the general path; 4-d: the fused kernel, and its create_graph (composed) backward
    for (int variant = 0; variant < 3; ++variant) {
        CAPTURE(variant);
        Shape lead = variant == 0 ? Shape{1} : Shape{1, 1};
        auto shaped = [&](const char* name, int64_t rows) {
            Shape s = lead;
            s.push_back(rows);
            s.push_back(2);
            return f.at(name).reshape(s).clone().requires_grad_(true);
        };
        Tensor q = shaped("q", 3), k = shaped("k", 1), v = shaped("v", 1);   // (*,3,2) (*,1,2) (*,1,2)
        Tensor y = F::scaled_dot_product_attention(q, k, v);
        CHECK(same_values(y.reshape({1, 3, 2}), f.at("y")));              // the dead rows: 0, not NaN
        tensor_list d = autograd::grad({y}, {q, k, v}, {ones_like(y)}, true, /*create_graph=*/variant == 2);
        CHECK(same_values(d[0].reshape({1, 3, 2}), f.at("dq")));
        CHECK(same_values(d[1].reshape({1, 1, 2}), f.at("dk")));
        CHECK(same_values(d[2].reshape({1, 1, 2}), f.at("dv")));
    }
}

TEST_CASE("binary_cross_entropy: gradients at p = 0 and 1 use PyTorch's float EPSILON and an unclamped -logit(p)") {
    Fixture f = load_fixture("edge_sweep_bce");
    Tensor p = leaf(f, "p"), y = leaf(f, "y");
    Tensor loss = F::binary_cross_entropy(p, y);
    CHECK(same_values(loss, f.at("loss")));
    loss.backward();
    CHECK(same_values(p.grad(), f.at("dp")));                      // (p - y) / 9.9999999600e-13 at the ends
    CHECK(same_values(y.grad(), f.at("dy")));                      // [-inf, finite, inf] / 3
}

TEST_CASE("max(dim) and min(dim) of a 0-d NaN return it and pass the gradient, as PyTorch") {
    for (bool use_max : {true, false}) {
        CAPTURE(use_max);
        Tensor s = scalar_tensor(std::nan(""), TensorOptions(kFloat16).requires_grad(true));
        auto [values, indices] = use_max ? max(s, -1, false) : min(s, -1, false);
        CHECK(std::isnan(values.item<double>()));
        CHECK(indices.item<int64_t>() == 0);
        values.backward();
        CHECK(s.grad().item<double>() == 1.0);                    // amax's rule would give NaN
    }
}

// ---- the elementwise classes of the seed-12 run (fixture edge_sweep_elementwise) ----

TEST_CASE("div: first and second gradients at b = +-0 and +-inf follow PyTorch's -g ((a / b) / b)") {
    Fixture f = load_fixture("edge_sweep_elementwise");
    Tensor a = leaf(f, "div_a"), b = leaf(f, "div_b");
    Tensor y = a / b;
    CHECK(same_values(y, f.at("div_y")));
    tensor_list d = autograd::grad({y}, {a, b}, {ones_like(y)}, true, /*create_graph=*/true);
    CHECK(same_values(d[0], f.at("div_da")));
    CHECK(same_values(d[1], f.at("div_db")));
    tensor_list dd = autograd::grad({(d[0] * 0.5 + d[1] * -1.25).sum()}, {a, b});
    CHECK(same_values(dd[0], f.at("div_dda")));
    CHECK(same_values(dd[1], f.at("div_ddb")));     // -a/b^2 would give NaN at b = inf (0 * inf)
    // an empty a with a NaN 0-d b: the second gradient to b is an empty sum, 0 (not 0 * NaN)
    Tensor e = zeros({0, 1, 2}, TensorOptions(kFloat32).requires_grad(true));
    Tensor n = scalar_tensor(std::nan(""), TensorOptions(kFloat32).requires_grad(true));
    Tensor q = e / n;
    tensor_list g = autograd::grad({q}, {e, n}, {ones_like(q)}, true, /*create_graph=*/true);
    tensor_list gg = autograd::grad({g[1] * 2.0}, {n}, {}, false, false, /*allow_unused=*/true);
    CHECK((!gg[0].defined() || gg[0].item<double>() == 0.0));
}

TEST_CASE("reciprocal and s / x in f16: y * y overflows to inf first, as PyTorch's -g (y * y)") {
    Fixture f = load_fixture("edge_sweep_elementwise");
    Tensor x = leaf(f, "rec_x");                                   // (3) f16, x[0] = 0.001
    reciprocal(x).sum().backward();
    CHECK(same_values(x.grad(), f.at("rec_dx")));                 // -inf, not -g y rounded twice
    for (auto [tag, s] : {std::pair<const char*, double>{"0", 0.0}, {"1e-3", 0.001}}) {
        CAPTURE(tag);
        Tensor xs = leaf(f, "rec_x");
        div(s, xs).sum().backward();
        CHECK(same_values(xs.grad(), f.at(std::string("rdiv") + tag + "_dx")));   // s = 0: 0 * inf = NaN
    }
}

TEST_CASE("pow(x, e): PyTorch's special exponents (sqrt, rsqrt, reciprocal, x*x, x*x*x, 1/(x*x)) per dtype") {
    Fixture f = load_fixture("edge_sweep_elementwise");
    std::vector<double> exps = f.params.at("pow_exponents").get<std::vector<double>>();
    for (auto [name, dt] : {std::pair<const char*, DType>{"f16", kFloat16}, {"bf16", kBFloat16}, {"f32", kFloat32}}) {
        for (size_t i = 0; i < exps.size(); ++i) {
            CAPTURE(name);
            CAPTURE(exps[i]);
            Tensor x = f.at("pow_x").to(dt).clone().requires_grad_(true);   // [-inf, -0, 0, nan, -2, 300, 0.25]
            Tensor y = pow(x, exps[i]);
            const std::string key = fmt::format("pow_{}_{}_", name, i);
            CHECK(same_values(y, f.at(key + "y")));                   // e.g. bf16 (-inf)^0.5 = NaN (sqrt)
            y.sum().backward();
            CHECK(same_values(x.grad(), f.at(key + "dx")));           // e.g. f32 0.5 (-0)^-0.5 = -inf (rsqrt)
        }
    }
}

TEST_CASE("s ** e in f16: the gradient takes log(s) of the double s, and is 0 at s = 0 where e >= 0") {
    Fixture f = load_fixture("edge_sweep_elementwise");
    std::vector<double> bases = f.params.at("rpow_bases").get<std::vector<double>>();
    for (size_t i = 0; i < bases.size(); ++i) {
        CAPTURE(bases[i]);
        Tensor e = leaf(f, "rpow_e");                               // (5) f16 [-1.5, 0, 0.3, 2, nan]
        Tensor y = pow(bases[i], e);
        CHECK(same_values(y, f.at(fmt::format("rpow_{}_y", i))));
        y.sum().backward();
        CHECK(same_values(e.grad(), f.at(fmt::format("rpow_{}_de", i))));   // log(f16(0.1)) is off by an f16 ulp
    }
}

TEST_CASE("scaled_dot_product_attention: a dead row's gradient is softmax's 0 * dP (NaN for an inf in v); empty outputs give zero gradients") {
    Fixture f = load_fixture("edge_sweep_attention");
    for (int variant = 0; variant < 3; ++variant) {               // 3-d general, 4-d fused, 4-d create_graph
        CAPTURE(variant);
        Shape lead = variant == 0 ? Shape{1} : Shape{1, 1};
        auto shaped = [&](const char* name, int64_t rows, int64_t cols) {
            Shape s = lead;
            s.push_back(rows);
            s.push_back(cols);
            return f.at(name).reshape(s).clone().requires_grad_(true);
        };
        Tensor q = shaped("q", 3, 2), k = shaped("k", 1, 2), v = shaped("v_inf", 1, 2);   // (*,3,2) (*,1,2) (*,1,2)
        Tensor y = F::scaled_dot_product_attention(q, k, v);
        CHECK(same_values(y.reshape({1, 3, 2}), f.at("y_vinf")));
        tensor_list d = autograd::grad({y}, {q, k, v}, {ones_like(y)}, true, /*create_graph=*/variant == 2);
        CHECK(same_values(d[0].reshape({1, 3, 2}), f.at("dq_vinf")));    // dead rows: NaN, not 0
        CHECK(same_values(d[1].reshape({1, 1, 2}), f.at("dk_vinf")));
        CHECK(same_values(d[2].reshape({1, 1, 2}), f.at("dv_vinf")));
        Tensor qe = shaped("q_empty", 2, 2), ke = shaped("k", 1, 2);
        Shape vs = lead;
        vs.push_back(1);
        vs.push_back(0);
        Tensor ve = zeros(vs, TensorOptions(kFloat32).requires_grad(true));   // (*,1,0): an empty output
        Tensor ye = F::scaled_dot_product_attention(qe, ke, ve);
        tensor_list de = autograd::grad({ye}, {qe, ke}, {ones_like(ye)}, true, /*create_graph=*/variant == 2);
        CHECK(same_values(de[0].reshape({1, 2, 2}), f.at("dq_empty")));   // zeros, not 0 * -inf
        CHECK(same_values(de[1].reshape({1, 1, 2}), f.at("dk_empty")));
    }
}

// ---- the classes of the seed 12-14 runs (fixture edge_sweep_round3) ----
namespace {
// first gradients of y (with dy) under create_graph, then the gradients of sum(g_i * v_i)
std::pair<tensor_list, tensor_list> second_grads(const Tensor& y, const tensor_list& xs, const tensor_list& vs,
                                                 const Tensor& dy) {
    tensor_list g = autograd::grad({y}, xs, {dy}, /*retain_graph=*/true, /*create_graph=*/true);
    Tensor total = (g[0] * vs[0]).sum();
    for (size_t i = 1; i < g.size(); ++i) total = total + (g[i] * vs[i]).sum();
    return {g, autograd::grad({total}, xs)};
}
bool negative_zero(double v) { return v == 0.0 && std::signbit(v); }
}  // namespace

TEST_CASE("binary_cross_entropy: second gradients are PyTorch's binary_cross_entropy_double_backward formulas") {
    Fixture f = load_fixture("edge_sweep_round3");
    for (std::string tag : {"f64", "f16", "f16z"}) {              // p in (0, 1), at 0, 1, -0; f16 p = 0.001 and -0
        CAPTURE(tag);
        Tensor p = leaf(f, "bce_" + tag + "_p"), y = leaf(f, "bce_" + tag + "_y");
        Tensor loss = F::binary_cross_entropy(p, y);
        auto [g, gg] = second_grads(loss, {p, y}, {f.at("bce_" + tag + "_vp"), f.at("bce_" + tag + "_vy")},
                                    full({}, -0.6875, TensorOptions(p.dtype())));
        CHECK(same_values(g[0], f.at("bce_" + tag + "_dp")));
        CHECK(same_values(g[1], f.at("bce_" + tag + "_dy")));
        CHECK(same_values(gg[0], f.at("bce_" + tag + "_ddp")));    // 1 / ((p + 1e-12)^2 (1 - p + 1e-12)^2) terms
        CHECK(same_values(gg[1], f.at("bce_" + tag + "_ddy")));    // -g v / max(p (1 - p), 1e-12)
    }
}

TEST_CASE("clamp and x + s round the scalar to the tensor's dtype first, as PyTorch (f16)") {
    Fixture f = load_fixture("edge_sweep_round3");
    Tensor h = f.at("h");                                          // [-0, 0, 1, -inf]
    Tensor lo = clamp(h, 1e-12, std::nullopt);
    CHECK(same_values(lo, f.at("h_clamp_lo")));
    CHECK(negative_zero(lo.to(kFloat64).to_vector<double>()[0])); // the bound rounds to 0: -0 stays -0
    CHECK(same_values(clamp(h, std::nullopt, -1e-12), f.at("h_clamp_hi")));
    CHECK(same_values(h + 0.00048829, f.at("h_add_tie")));         // 1 + 2^-11 is a tie: 1
    CHECK(same_values(h + 1e5, f.at("h_add_big")));                // 1e5 rounds to inf: -inf + inf = NaN
    CHECK(same_values(h - (-1e5), f.at("h_sub_big")));
    Tensor hi = h.clone();
    hi.add_(1e5);
    CHECK(same_values(hi, f.at("h_add_inplace")));
}

TEST_CASE("norm(x) in f16 takes the root in f32 and groups its gradient g * (x / n), as PyTorch") {
    Fixture f = load_fixture("edge_sweep_round3");
    Tensor x = leaf(f, "norm16_x");                                // 0.0010004: its f16 square is subnormal
    Tensor y = norm(x);
    CHECK(same_values(y, f.at("norm16_y")));                       // 0.0010004, not 0.001007
    auto [g, gg] = second_grads(y, {x}, {full({}, 2.044979419219826, TensorOptions(kFloat64))},
                                full({}, -0.57275390625, TensorOptions(kFloat16)));
    CHECK(same_values(g[0], f.at("norm16_dx")));
    CHECK(same_values(gg[0], f.at("norm16_ddx")));                 // 0, not g / n^2 overflowing to inf
}

TEST_CASE("layer_norm: a constant row's mean is exact, so its output is the bias, as PyTorch's Welford moments") {
    Fixture f = load_fixture("edge_sweep_round3");
    Tensor x = leaf(f, "ln_x"), w = leaf(f, "ln_w"), b = leaf(f, "ln_b");   // row 0 is -1.3 ten times (f32)
    Tensor y = F::layer_norm(x, {10}, w, b, 1e-5);
    CHECK(same_values(y, f.at("ln_y")));
    CHECK(equal(y.narrow(0, 0, 1).detach(), b.detach().view({1, 10})));   // exactly b, not b + 1e-5-sized noise
    tensor_list d = autograd::grad({y}, {x, w, b}, {f.at("ln_dy")});
    CHECK_CLOSE(d[0], f.at("ln_dx"), tol_for(kFloat32, 16));      // rstd = 316 on row 0: f32 rounding of
    CHECK_CLOSE(d[1], f.at("ln_dw"), tol_for(kFloat32, 16));      // differently grouped sums
    CHECK(same_values(d[2], f.at("ln_db")));
}

TEST_CASE("scaled_dot_product_attention: f16 on the general path is computed in f32, as PyTorch's math path") {
    Fixture f = load_fixture("edge_sweep_round3");
    // a tiny probability (exp(-18)) times -inf: -inf, where an f16 P would underflow and give 0 * inf
    Tensor y = F::scaled_dot_product_attention(f.at("at16_q"), f.at("at16_k"), f.at("at16_v"), Tensor(), 0.0,
                                               false, -1.0);
    CHECK(same_values(y, f.at("at16_y")));
    Tensor q = leaf(f, "at16r_q"), k = leaf(f, "at16r_k"), v = leaf(f, "at16r_v");   // 3-d f16
    Tensor yr = F::scaled_dot_product_attention(q, k, v);
    CHECK_CLOSE(yr, f.at("at16r_y"), tol_for(kFloat16, 1));        // f32 values rounded once
    tensor_list d = autograd::grad({yr}, {q, k, v}, {f.at("at16r_dy")});
    CHECK_CLOSE(d[0], f.at("at16r_dq"), tol_for(kFloat16, 1));
    CHECK_CLOSE(d[1], f.at("at16r_dk"), tol_for(kFloat16, 1));
    CHECK_CLOSE(d[2], f.at("at16r_dv"), tol_for(kFloat16, 1));
}

TEST_CASE("scaled_dot_product_attention: 4-d with v's head size != q's takes the general path, as PyTorch") {
    Fixture f = load_fixture("edge_sweep_round3");
    Tensor q = leaf(f, "at4_q"), k = leaf(f, "at4_k"), v = leaf(f, "at4_v");   // a dead row (k = -inf), inf in v
    Tensor y = F::scaled_dot_product_attention(q, k, v, /*is_causal=*/true);
    CHECK(same_values(y, f.at("at4_y")));
    auto [g, gg] = second_grads(y, {q, k, v}, {f.at("at4_vq"), f.at("at4_vk"), f.at("at4_vv")}, f.at("at4_dy"));
    CHECK(same_values(g[0], f.at("at4_dq")));
    CHECK(same_values(g[1], f.at("at4_dk")));
    CHECK(same_values(g[2], f.at("at4_dv")));
    CHECK(same_values(gg[0], f.at("at4_ddq")));                   // NaN through the dead row, as PyTorch's math path
    CHECK(same_values(gg[1], f.at("at4_ddk")));
    CHECK(same_values(gg[2], f.at("at4_ddv")));
}
