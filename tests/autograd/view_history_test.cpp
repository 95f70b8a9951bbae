// view_history_test.cpp: in-place writes through views (autograd/view_history.hpp). Each
// gradient is checked against the same computation written without in-place ops (cat/narrow),
// and by an f64 gradcheck; then the errors PyTorch raises for the forbidden cases.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

TensorOptions f64_grad() { return TensorOptions(kFloat64).requires_grad(true); }
std::vector<double> values(const Tensor& t) { return t.to(kFloat64).contiguous().to_vector<double>(); }

// Rows [start, start+len) of b replaced by `rows`, without in-place ops: (N,C)
Tensor replace_rows(const Tensor& b, int64_t start, const Tensor& rows) {
    int64_t n = b.size(0), len = rows.size(0);
    tensor_list parts;
    if (start > 0) parts.push_back(b.narrow(0, 0, start));
    parts.push_back(rows);
    if (start + len < n) parts.push_back(b.narrow(0, start + len, n - start - len));
    return cat(parts, 0);
}

// The program of tools/fixtures/autograd_views.py: returns (loss, b).
std::pair<Tensor, Tensor> fixture_program(const Tensor& x, const Tensor& w, const Tensor& s) {
    Tensor b = x * 2.0 + 0.5;                                   // (4,3)
    Tensor first = b.select(0, 0);                              // a view made before the writes
    b.select(0, 2).mul_(w);
    b.t().narrow(0, 1, 2).narrow(1, 0, 2).add_(s, 0.5);
    Tensor buf = zeros({4, 3}, x.dtype());
    buf.narrow(1, 0, 1).copy_(x.narrow(1, 2, 1).tanh());
    Tensor loss = (b * b).sum() + (first * 3.0).sum() + (buf * b).sum();
    return {loss, b};
}

}  // namespace

TEST_CASE("writes through views match PyTorch, first and second order (fixture autograd_view_inplace)") {
    Fixture fx = load_fixture("autograd_view_inplace");
    Tensor x = fx.at("x").clone().requires_grad_(true);
    Tensor w = fx.at("w").clone().requires_grad_(true), s = fx.at("s").clone().requires_grad_(true);
    auto [loss, b] = fixture_program(x, w, s);
    loss.backward();
    CHECK_CLOSE(b, fx.at("b"), tol_for(kFloat32));
    CHECK_CLOSE(loss, fx.at("loss"), tol_for(kFloat32));
    CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32));
    CHECK_CLOSE(w.grad(), fx.at("dw"), tol_for(kFloat32));
    CHECK_CLOSE(s.grad(), fx.at("ds"), tol_for(kFloat32));
    Tensor gx = autograd::grad({fixture_program(x, w, s).first}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
    tensor_list gg = autograd::grad({gx.sum()}, {x, w});
    CHECK_CLOSE(gg[0], fx.at("ggx"), tol_for(kFloat32, 16));
    CHECK_CLOSE(gg[1], fx.at("ggw"), tol_for(kFloat32, 16));
}

TEST_CASE("mul_ through a narrow view: the base's gradient flows through the multiply") {
    manual_seed(7);
    Tensor x = randn({4, 3}, f64_grad()), w = randn({2, 3}, f64_grad());
    Tensor b = x * 1.5;
    b.narrow(0, 1, 2).mul_(w);                                  // rows 1..2 of b *= w
    CHECK(b.grad_fn()->op() == "copy_slices");
    (b * b).sum().backward();
    Tensor gx = x.grad().clone(), gw = w.grad().clone();

    x.set_grad(Tensor());
    w.set_grad(Tensor());
    Tensor b0 = x * 1.5;
    Tensor expected = replace_rows(b0, 1, b0.narrow(0, 1, 2) * w);
    (expected * expected).sum().backward();
    CHECK(equal(b.detach(), expected.detach()));
    CHECK_CLOSE(gx, x.grad(), tol_for(kFloat64));
    CHECK_CLOSE(gw, w.grad(), tol_for(kFloat64));
}

TEST_CASE("split: one node for the pieces; a write through a piece rewrites the base's history") {
    manual_seed(9);
    Tensor x = randn({5, 3}, f64_grad()), w = randn({2, 3}, f64_grad());
    Tensor b = x * 1.5;
    tensor_list pieces = b.split(2, 0);                          // rows 0-1, 2-3, 4
    REQUIRE(pieces.size() == 3);
    CHECK(pieces[0].grad_fn() == pieces[2].grad_fn());          // one "split" node, as PyTorch's SplitBackward0
    CHECK(pieces[1].grad_fn()->op() == "split");
    Tensor first = pieces[0] * 2.0;                              // a piece used before the write
    pieces[1].mul_(w);                                           // rows 2..3 of b *= w
    CHECK(b.grad_fn()->op() == "copy_slices");
    ((b * b).sum() + first.sum() + (pieces[2] * 3.0).sum()).backward();
    Tensor gx = x.grad().clone(), gw = w.grad().clone();

    x.set_grad(Tensor());
    w.set_grad(Tensor());
    Tensor b0 = x * 1.5;
    Tensor expected = replace_rows(b0, 2, b0.narrow(0, 2, 2) * w);
    ((expected * expected).sum() + (b0.narrow(0, 0, 2) * 2.0).sum() + (b0.narrow(0, 4, 1) * 3.0).sum()).backward();
    CHECK(equal(b.detach(), expected.detach()));
    CHECK_CLOSE(gx, x.grad(), tol_for(kFloat64));
    CHECK_CLOSE(gw, w.grad(), tol_for(kFloat64));
    // A piece no gradient reaches contributes zeros to the cat; first and second order by gradcheck.
    auto f = [](const tensor_list& in) {
        tensor_list p = (in[0] * 2.0).split(2, 1);               // (5,2), (5,1)
        return tensor_list{p[0].tanh() * p[0]};
    };
    CHECK(autograd::gradcheck(f, {x}));
    CHECK(autograd::gradgradcheck(f, {x}));
}

TEST_CASE("writes through views pass f64 gradcheck (narrow, select, transpose)") {
    manual_seed(8);
    Tensor x = randn({4, 3}, f64_grad()), w = randn({3}, f64_grad()), s = randn({2, 2}, f64_grad());
    auto f = [](const tensor_list& in) {
        Tensor b = in[0] * 2.0 + 0.5;                              // (4,3) non-leaf base
        b.select(0, 2).mul_(in[1]);                                 // row 2 *= w
        b.t().narrow(0, 1, 2).narrow(1, 0, 2).add_(in[2], 0.5);    // b[0:2, 1:3]^T += 0.5 s
        Tensor c = b * 1.0;
        c.narrow(1, 0, 1).copy_(in[0].narrow(1, 2, 1).tanh());      // column 0 = tanh(x[:, 2])
        return tensor_list{c * b};
    };
    CHECK(autograd::gradcheck(f, {x, w, s}));
    CHECK(autograd::gradgradcheck(f, {x, w, s}));
}

TEST_CASE("a base that did not require grad gains history through its view") {
    manual_seed(9);
    Tensor x = randn({2, 3}, f64_grad());
    Tensor buf = zeros({4, 3}, kFloat64);
    CHECK_FALSE(buf.requires_grad());
    buf.narrow(0, 1, 2).copy_(x * 2.0);
    CHECK(buf.requires_grad());
    (buf * buf).sum().backward();                               // d/dx (2x)^2 = 8x
    CHECK_CLOSE(x.grad(), x.detach() * 8.0, tol_for(kFloat64));
}

TEST_CASE("other views of the base regenerate their grad_fn; saved tensors see the version bump") {
    manual_seed(10);
    Tensor x = randn({3, 4}, f64_grad()), w = randn({4}, f64_grad());
    Tensor b = x * 1.0;
    Tensor first_row = b.select(0, 0);                          // made before the write
    auto* before = first_row.grad_fn().get();
    b.select(0, 0).mul_(w);
    CHECK(first_row.grad_fn().get() != before);                  // regenerated: reads the new base
    CHECK(first_row.grad_fn()->op() == "as_strided");
    (first_row * 3.0).sum().backward();
    CHECK_CLOSE(w.grad(), x.detach().select(0, 0) * 3.0, tol_for(kFloat64));
    CHECK_CLOSE(x.grad().select(0, 0), w.detach() * 3.0, tol_for(kFloat64));
    CHECK(values(x.grad().narrow(0, 1, 2).abs().sum())[0] == 0.0);

    Tensor c = x * 1.0;
    Tensor saved_user = c * c;                                  // saves c at version 0
    c.narrow(0, 0, 1).mul_(w);
    CHECK_THROWS_WITH_AS(saved_user.sum().backward(), doctest::Contains("modified by an inplace operation"),
                         AutogradError);
}

TEST_CASE("forbidden writes through views are clear AutogradErrors") {
    Tensor leaf = ones({3, 2}, f64_grad());
    Tensor w = ones({2}, f64_grad());
    CHECK_THROWS_WITH_AS(leaf.select(0, 1).mul_(w), doctest::Contains("a view of a leaf Variable that requires grad"),
                         AutogradError);
    Tensor b = leaf * 2.0;
    Tensor v;
    {
        NoGradGuard no_grad;
        v = b.narrow(0, 0, 2);
        v.mul_(2.0);                                            // fine: nothing is recorded under no_grad
    }
    CHECK_THROWS_WITH_AS(v.mul_(w), doctest::Contains("created in no_grad mode"), AutogradError);
    Tensor e = (b.narrow(1, 0, 1) * 1.0).expand({3, 4});
    CHECK_THROWS_WITH_AS(e.mul_(ones({4}, f64_grad())), doctest::Contains("more than one element"), AutogradError);
    // A view of a leaf can still be written under no_grad (an optimizer does that).
    {
        NoGradGuard no_grad;
        leaf.select(0, 0).fill_(5.0);
    }
    CHECK(values(leaf.select(0, 0)) == std::vector<double>{5.0, 5.0});
}

TEST_CASE("double backward through a write into a view") {
    // b = [x0 * x1, x1]; loss = sum(b^2) = x0^2 x1^2 + x1^2 (elementwise over the row)
    Tensor x = tensor<double>({2, 3, 5, 7}, {2, 2}, f64_grad());
    Tensor b = x * 1.0;
    b.select(0, 0).mul_(x.select(0, 1));
    Tensor g = autograd::grad({(b * b).sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
    // d/dx0 = 2 x0 x1^2, d/dx1 = 2 x0^2 x1 + 2 x1
    CHECK(values(g) == std::vector<double>{2 * 2 * 25, 2 * 3 * 49, 2 * 4 * 5 + 2 * 5, 2 * 9 * 7 + 2 * 7});
    // sum(g) differentiated again: d/dx0 = 2 x1^2 + 4 x0 x1, d/dx1 = 4 x0 x1 + 2 x0^2 + 2
    Tensor gg = autograd::grad({g.sum()}, {x})[0];
    CHECK(values(gg) == std::vector<double>{2 * 25 + 4 * 2 * 5, 2 * 49 + 4 * 3 * 7, 4 * 2 * 5 + 2 * 4 + 2,
                                            4 * 3 * 7 + 2 * 9 + 2});
}
