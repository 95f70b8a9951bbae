// custom_function_test.cpp: autograd::Function<T> with AutogradContext: save_for_backward,
// saved_data, needs_input_grad, non-differentiable and dirty outputs, materialize_grads, the
// gradient count/shape checks; f64 gradcheck and f16/bf16 against f64.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
using autograd::AutogradContext;

namespace {

// y = x * c with a non-tensor argument; the gradient for c is undefined.
struct MulConst : autograd::Function<MulConst> {
    static Tensor forward(AutogradContext* ctx, const Tensor& x, double c) {
        ctx->saved_data["c"] = c;
        ctx->saved_data["label"] = "mul by constant";
        return x * c;
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        CHECK(ctx->saved_data["label"].toStringRef() == "mul by constant");
        return {grads[0] * ctx->saved_data["c"].toDouble(), Tensor()};
    }
};

// z = x * exp(y): saves an input and its own output; computes only the needed gradients.
struct MulExp : autograd::Function<MulExp> {
    static constexpr const char* name = "mul_exp";
    static inline std::vector<bool> needed;
    static tensor_list forward(AutogradContext* ctx, const Tensor& x, const Tensor& y) {
        Tensor e = y.exp();
        Tensor z = x * e;
        ctx->save_for_backward({x, e, z});
        return {z};
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        tensor_list s = ctx->get_saved_variables();
        needed = {ctx->needs_input_grad(0), ctx->needs_input_grad(1)};
        Tensor gx = ctx->needs_input_grad(0) ? grads[0] * s[1] : Tensor();
        Tensor gy = ctx->needs_input_grad(1) ? grads[0] * s[2] : Tensor();   // dz/dy = z
        return {gx, gy};
    }
};

// Values and argmax-like indices: the second output is non-differentiable.
struct SortedPair : autograd::Function<SortedPair> {
    static tensor_list forward(AutogradContext* ctx, const Tensor& x) {
        Tensor big = maximum(x, x * 0.0);
        Tensor idx = gt(x, zeros_like(x)).to(kFloat64);
        ctx->mark_non_differentiable({idx});
        ctx->save_for_backward({x});
        return {big, idx};
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        CHECK(grads[1].defined());                        // materialized as zeros
        CHECK(grads[1].sum().item<double>() == 0.0);
        Tensor x = ctx->get_saved_variables()[0];
        return {grads[0] * gt(x, zeros_like(x)).to(grads[0].dtype())};
    }
};

// In place: x.mul_(2) and return x (marked dirty).
struct DoubleInPlace : autograd::Function<DoubleInPlace> {
    static Tensor forward(AutogradContext* ctx, Tensor x) {
        x.mul_(2.0);
        ctx->mark_dirty({x});
        return x;
    }
    static tensor_list backward(AutogradContext*, tensor_list grads) { return {grads[0] * 2.0}; }
};

struct WrongCount : autograd::Function<WrongCount> {
    static Tensor forward(AutogradContext*, const Tensor& x) { return x * 1.0; }
    static tensor_list backward(AutogradContext*, tensor_list grads) { return {grads[0], grads[0]}; }
};

struct WrongShape : autograd::Function<WrongShape> {
    static Tensor forward(AutogradContext*, const Tensor& x) { return x * 1.0; }
    static tensor_list backward(AutogradContext*, tensor_list) { return {zeros({5}, kFloat64)}; }
};

struct NoMaterialize : autograd::Function<NoMaterialize> {
    static tensor_list forward(AutogradContext* ctx, const Tensor& x) {
        ctx->set_materialize_grads(false);
        return {x * 1.0, x * 2.0};
    }
    static tensor_list backward(AutogradContext*, tensor_list grads) {
        CHECK_FALSE(grads[1].defined());
        return {grads[0]};
    }
};

// Takes a tensor list argument: each tensor is one gradient position.
struct SumList : autograd::Function<SumList> {
    static Tensor forward(AutogradContext*, const tensor_list& xs, double scale) {
        Tensor s = xs[0] * scale;
        for (size_t i = 1; i < xs.size(); ++i) s = s + xs[i] * scale;
        return s;
    }
    static tensor_list backward(AutogradContext*, tensor_list grads) {
        return {grads[0], grads[0] * 2.0, Tensor()};
    }
};

Tensor leaf(std::vector<double> v) {
    Tensor t = tensor<double>(v);
    t.requires_grad_(true);
    return t;
}

}  // namespace

TEST_CASE("Function<T>: forward runs without recording; apply joins the graph with one node") {
    Tensor x = leaf({1, 2});
    Tensor y = MulConst::apply(x, 3.0);
    CHECK(y.grad_fn()->name() == "MulConstBackward");
    CHECK(y.grad_fn()->next_edges().size() == 1);
    (y * y).sum().backward();
    CHECK_CLOSE(x.grad(), tensor<double>({18, 36}), tol_for(kFloat64));
    Tensor plain = tensor<double>({1});
    CHECK_FALSE(MulConst::apply(plain, 2.0).requires_grad());
}

TEST_CASE("save_for_backward, needs_input_grad and a declared name") {
    Tensor x = leaf({1, 2}), y = leaf({0.5, -1});
    Tensor z = MulExp::apply(x, y)[0];
    CHECK(z.grad_fn()->name() == "MulExpBackward");
    z.sum().backward(Tensor(), true);
    CHECK(MulExp::needed == std::vector<bool>{true, true});
    CHECK_CLOSE(x.grad(), y.detach().exp(), tol_for(kFloat64));
    CHECK_CLOSE(y.grad(), (x * y.exp()).detach(), tol_for(kFloat64));
    autograd::grad({z.sum()}, {y});                  // only y's gradient is needed now
    CHECK(MulExp::needed == std::vector<bool>{false, true});
}

TEST_CASE("saved variables are freed after backward and version-checked") {
    Tensor x = leaf({1, 2}), y = leaf({1, 1});
    Tensor z = MulExp::apply(x, y)[0];
    z.sum().backward();
    CHECK_THROWS_WITH_AS(z.sum().backward(), doctest::Contains("backward through the graph a second time"),
                         AutogradError);
    Tensor a = x * 1.0;                              // a non-leaf input, then modified in place
    Tensor z2 = MulExp::apply(a, y)[0];
    {
        NoGradGuard no_grad;
        a.add_(1.0);
    }
    CHECK_THROWS_WITH_AS(z2.sum().backward(), doctest::Contains("modified by an inplace operation"), AutogradError);
}

TEST_CASE("non-differentiable outputs and materialized zero gradients") {
    Tensor x = leaf({-1, 2});
    tensor_list out = SortedPair::apply(x);
    CHECK(out[0].requires_grad());
    CHECK_FALSE(out[1].requires_grad());
    out[0].sum().backward();
    CHECK_CLOSE(x.grad(), tensor<double>({0, 1}), tol_for(kFloat64));
    Tensor w = leaf({3});
    NoMaterialize::apply(w)[0].sum().backward();
    CHECK_CLOSE(w.grad(), tensor<double>({1}), tol_for(kFloat64));
}

TEST_CASE("mark_dirty: the modified input becomes an output of the node") {
    Tensor x = leaf({1, 2});
    Tensor a = x * 1.0;
    uint32_t version = a._version();
    Tensor b = DoubleInPlace::apply(a);
    CHECK(b.is_same(a));
    CHECK(a._version() > version);
    CHECK(a.grad_fn()->name() == "DoubleInPlaceBackward");
    (a * 3.0).sum().backward();
    CHECK_CLOSE(x.grad(), tensor<double>({6, 6}), tol_for(kFloat64));
    Tensor leaf_x = leaf({1});
    CHECK_THROWS_WITH_AS(DoubleInPlace::apply(leaf_x),
                         doctest::Contains("a leaf Variable that requires grad has been used in an in-place operation"),
                         AutogradError);
}

TEST_CASE("backward must return one gradient per argument, of a compatible shape") {
    Tensor x = leaf({1, 2});
    CHECK_THROWS_WITH_AS(WrongCount::apply(x).sum().backward(),
                         doctest::Contains("function WrongCountBackward returned an incorrect number of gradients "
                                           "(expected 1, got 2)"),
                         AutogradError);
    CHECK_THROWS_WITH_AS(WrongCount::apply(x).sum().backward(),   // validate_outputs' text too (PyTorch's engine)
                         doctest::Contains("Function WrongCountBackward returned an invalid number of gradients - "
                                           "expected 1, but got 2"),
                         AutogradError);
    CHECK_THROWS_WITH_AS(WrongShape::apply(x).sum().backward(),
                         doctest::Contains("WrongShapeBackward returned an invalid gradient at index 0 - got [5] but "
                                           "expected shape compatible with [2]"),
                         AutogradError);
}

TEST_CASE("tensor_list arguments: one gradient position per tensor") {
    Tensor a = leaf({1, 2}), b = leaf({3, 4});
    SumList::apply(tensor_list{a, b}, 1.0).sum().backward();
    CHECK_CLOSE(a.grad(), tensor<double>({1, 1}), tol_for(kFloat64));
    CHECK_CLOSE(b.grad(), tensor<double>({2, 2}), tol_for(kFloat64));
}

TEST_CASE("saved_data type errors are clear") {
    autograd::IValue v = 2.5;
    CHECK(v.toDouble() == 2.5);
    CHECK(autograd::IValue(int64_t{3}).toDouble() == 3.0);
    CHECK_THROWS_WITH_AS(v.toStringRef(), doctest::Contains("expected a string but the value is a double"), ValueError);
}

TEST_CASE("custom functions pass f64 gradcheck and work in f16/bf16") {
    manual_seed(5);
    Tensor x = randn({3, 2}, TensorOptions(kFloat64).requires_grad(true));
    Tensor y = randn({3, 2}, TensorOptions(kFloat64).requires_grad(true));
    CHECK(autograd::gradcheck([](const tensor_list& in) { return MulExp::apply(in[0], in[1]); }, {x, y}));
    CHECK(autograd::gradgradcheck([](const tensor_list& in) { return tensor_list{MulConst::apply(in[0] * in[0], 2.0)}; },
                                  {x}));
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor xl = x.detach().to(dt).requires_grad_(true), yl = y.detach().to(dt).requires_grad_(true);
        Tensor xr = xl.detach().to(kFloat64).requires_grad_(true), yr = yl.detach().to(kFloat64).requires_grad_(true);
        Tensor zl = MulExp::apply(xl, yl)[0], zr = MulExp::apply(xr, yr)[0];
        CHECK_CLOSE(zl.to(kFloat64), zr, tol_for(dt));
        zl.sum().backward();
        zr.sum().backward();
        CHECK(xl.grad().dtype() == dt);
        CHECK_CLOSE(yl.grad().to(kFloat64), yr.grad(), tol_for(dt));
    }
}
