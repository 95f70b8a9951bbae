// view_test.cpp: views share storage and version counters; shape ops match PyTorch forward and
// backward; f64 gradcheck; dtype/device casts; bad input.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
using ListFn = std::function<Tensor(const tensor_list&)>;

void check_fixture(const std::string& name, size_t n_inputs, const ListFn& fn) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    tensor_list xs;
    for (size_t i = 0; i < n_inputs; ++i) xs.push_back(fx.at(fmt::format("x{}", i)).clone().requires_grad_(true));
    Tensor y = fn(xs);
    y.backward(fx.at("dy"));
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    for (size_t i = 0; i < n_inputs; ++i) CHECK_CLOSE(xs[i].grad(), fx.at(fmt::format("dx{}", i)), tol_for(kFloat32));
}
}  // namespace

TEST_CASE("shape ops match PyTorch forward and backward") {
    check_fixture("view_permute_reshape", 1, [](const tensor_list& t) { return t[0].permute({2, 0, 1}).reshape({4, 6}); });
    check_fixture("view_expand", 1, [](const tensor_list& t) { return t[0].narrow(1, 0, 1).expand({2, 5, 4}) * 1.0; });
    check_fixture("view_narrow_select", 1, [](const tensor_list& t) { return t[0].narrow(2, 1, 2).select(1, 2); });
    check_fixture("view_cat", 2, [](const tensor_list& t) { return cat({t[0], t[1]}, 1); });
    check_fixture("view_stack", 1, [](const tensor_list& t) { return stack({t[0], t[0] * 2.0}, 1); });
    check_fixture("view_split_second", 1, [](const tensor_list& t) { return t[0].split(2, 2)[1]; });
}

TEST_CASE("shape ops pass float64 gradcheck") {
    manual_seed(3);
    Tensor x = randn({2, 3, 4}, TensorOptions(kFloat64).requires_grad(true));
    auto gc = [&](const ListFn& fn) {
        return autograd::gradcheck([&](const tensor_list& in) { return tensor_list{fn(in)}; }, {x});
    };
    CHECK(gc([](const tensor_list& t) { return t[0].transpose(0, 2).reshape({-1, 2}); }));
    CHECK(gc([](const tensor_list& t) { return t[0].unsqueeze(1).squeeze(1).view({6, 4}); }));
    CHECK(gc([](const tensor_list& t) { return t[0].select(2, -1).expand({5, 2, 3}); }));
    CHECK(gc([](const tensor_list& t) { return cat(t[0].split(3, 2), 2); }));
    CHECK(gc([](const tensor_list& t) { return stack({t[0], t[0].exp()}, 0).contiguous(); }));
}

TEST_CASE("dtype casts are differentiable and return gradients in the source dtype") {
    Tensor x = randn({3}, TensorOptions(kFloat64).requires_grad(true));
    Tensor y = x.to(kFloat16);
    CHECK(y.dtype() == kFloat16);
    (y.to(kFloat32) * 3.0).sum().backward();
    CHECK(x.grad().dtype() == kFloat64);
    CHECK_CLOSE(x.grad(), full({3}, 3.0, kFloat64), tol_for(kFloat64));
    CHECK(x.to(kInt64).requires_grad() == false);
}

TEST_CASE("views share storage and the version counter") {
    Tensor x = zeros({2, 3});
    Tensor v = x.view({3, 2});
    CHECK(v.raw_data() == x.raw_data());
    uint32_t before = x._version();
    v.add_(1.0);
    CHECK(x._version() == before + 1);
    CHECK(x.sum().item<float>() == 6.0f);
    Tensor t = x.transpose(0, 1);
    CHECK_FALSE(t.is_contiguous());
    CHECK(t.contiguous().is_contiguous());
    CHECK(x.narrow(1, 1, 2).storage_offset() == 1);
}

TEST_CASE("shape ops keep f16/bf16 values bit-exact") {
    for (DType dt : {kFloat16, kBFloat16}) {
        Tensor x = randn({3, 4}).to(dt);
        Tensor y = cat({x.transpose(0, 1).contiguous().transpose(0, 1), x}, 0);
        CHECK(y.dtype() == dt);
        CHECK(equal(y.narrow(0, 0, 3).contiguous(), x));
        CHECK(equal(y.narrow(0, 3, 3).contiguous(), x));
    }
    Tensor mixed = cat({ones({2}, kFloat16), ones({2}, kFloat32)}, 0);
    CHECK(mixed.dtype() == kFloat32);
}

TEST_CASE("in-place writes through a view rewrite the base's history (more in view_history_test)") {
    Tensor a = randn({4}, TensorOptions().requires_grad(true));
    Tensor b = a * 2.0;
    Tensor v = b.view({2, 2});
    v.mul_(3.0);
    (b * 1.0).sum().backward();
    CHECK(equal(a.grad(), full({4}, 6.0)));
}

TEST_CASE("shape ops reject bad input naming the op and operands") {
    Tensor x = zeros({2, 3});
    CHECK_THROWS_WITH_AS(x.view({4, 2}), doctest::Contains("view: shape (4,2) is invalid for input of size 6"), ShapeError);
    CHECK_THROWS_WITH_AS(x.transpose(0, 1).view({6}), doctest::Contains("Use .reshape(...) instead"), ShapeError);
    CHECK_THROWS_WITH_AS(x.expand({3, 3}), doctest::Contains("expand: the expanded size 3 must match"), ShapeError);
    CHECK_THROWS_WITH_AS(x.narrow(1, 2, 2), doctest::Contains("narrow:"), IndexError);
    CHECK_THROWS_WITH_AS(x.select(0, 5), doctest::Contains("select: index 5 out of range"), IndexError);
    CHECK_THROWS_WITH_AS(cat({x, zeros({2, 2, 1})}, 0), doctest::Contains("cat: tensors must have the same number"), ShapeError);
    CHECK_THROWS_WITH_AS(cat({x, zeros({3, 2})}, 0), doctest::Contains("cat: sizes of tensors must match"), ShapeError);
    CHECK_THROWS_WITH_AS(x.permute({0, 0}), doctest::Contains("permute: repeated dim"), ValueError);
    CHECK_THROWS_WITH_AS(x.view({-1, -1}), doctest::Contains("only one dimension can be inferred"), ShapeError);
}

// PyTorch's legacy rule (torch.cat([torch.empty(0), x], 1) is x): 1-d tensors of size 0 are left out
// of cat's shape checks, whatever the dim; they still promote the dtype and get an empty gradient.
TEST_CASE("cat skips 1-d empty tensors, as PyTorch's legacy rule, and gives them empty gradients") {
    Tensor acc = empty({0}, TensorOptions(kFloat16)).requires_grad_(true);
    Tensor x = randn({2, 3}).requires_grad_(true);
    Tensor y = cat({acc, x}, 1);                                            // (2,3): dim 1 of x
    CHECK(y.sizes() == Shape{2, 3});
    CHECK(y.dtype() == kFloat32);
    CHECK(equal(y, x));
    y.sum().backward();
    CHECK(acc.grad().sizes() == Shape{0});
    CHECK(acc.grad().dtype() == kFloat16);
    CHECK(equal(x.grad(), ones({2, 3})));
    CHECK(cat({x, empty({0}), x}, 0).sizes() == Shape{4, 3});
    CHECK(cat({empty({0}), empty({0})}, 5).sizes() == Shape{0});           // all skipped: any dim
    CHECK_THROWS_AS(cat({empty({0, 3}), x}, 1), ShapeError);                // 2-d empty is not skipped
}
