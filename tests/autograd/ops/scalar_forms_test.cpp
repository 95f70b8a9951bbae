// scalar_forms_test.cpp: the libtorch spellings that take a number where the core ops take tensors
// (autograd/ops/scalar_forms.cpp) and the other forms a libtorch user writes: comparisons against a
// scalar on either side, where() with number branches, clamp with one bound, compound assignment,
// gelu's approximate string, reductions over one int dim, in-place methods on a const handle,
// arithmetic and softmax methods, and `std::cout << tensor`. Values against the tensor forms.
#include <doctest/doctest.h>

#include <sstream>

#include "tests/support/check_close.hpp"

using namespace ampgrad;

namespace {
const testing::Tolerance kExact{0, 0};

std::vector<bool> bools(const Tensor& t) {
    std::vector<bool> out;
    for (bool b : t.to_vector<bool>()) out.push_back(b);
    return out;
}
}  // namespace

TEST_CASE("comparisons with a scalar on either side, as operators and as methods, give kBool") {
    Tensor x = tensor<float>({-1, 0, 0.5f, 2});
    CHECK((x >= 0).dtype() == kBool);
    CHECK(bools(x >= 0) == std::vector<bool>{false, true, true, true});
    CHECK(bools(x <= 0.5) == std::vector<bool>{true, true, true, false});
    CHECK(bools(x == 0) == std::vector<bool>{false, true, false, false});
    CHECK(bools(x != 0) == std::vector<bool>{true, false, true, true});
    CHECK(bools(0 < x) == bools(x > 0));
    CHECK(bools(0.5 >= x) == bools(x <= 0.5));
    CHECK(bools(x.eq(2)) == std::vector<bool>{false, false, false, true});
    CHECK(bools(x.gt(0)) == bools(gt(x, 0)));
    CHECK(bools(x.lt(x)) == std::vector<bool>{false, false, false, false});
    // as in PyTorch, the number takes the tensor's dtype: an f16 0.1 equals 0.1, and is not below it
    CHECK(bools(full({1}, 0.1, kFloat16) == 0.1) == std::vector<bool>{true});
    CHECK(bools(full({1}, 0.1, kFloat16) < 0.1) == std::vector<bool>{false});
}

TEST_CASE("where with number branches, clamp with one bound, clamp_min / clamp_max") {
    Tensor c = tensor<bool>({true, false, true});
    Tensor y = tensor<float>({10, 20, 30});
    CHECK(where(c, 0.0, y).to_vector<float>() == std::vector<float>{0, 20, 0});
    Tensor ones_zeros = where(c, 1.0, 0.0);
    CHECK(ones_zeros.dtype() == kFloat32);
    CHECK(ones_zeros.to_vector<float>() == std::vector<float>{1, 0, 1});
    Tensor x = tensor<float>({-2, 0.5f, 3});
    CHECK(x.clamp(0).to_vector<float>() == std::vector<float>{0, 0.5f, 3});
    CHECK(clamp(x, 0).to_vector<float>() == x.clamp_min(0).to_vector<float>());
    CHECK(x.clamp_max(1).to_vector<float>() == std::vector<float>{-2, 0.5f, 1});
    Tensor z = x.clone();
    z.clamp_(0);
    CHECK(z.to_vector<float>() == std::vector<float>{0, 0.5f, 3});
}

TEST_CASE("compound assignment is in place: the same storage, a version bump, and autograd through it") {
    Tensor a = tensor<float>({1, 2, 3});
    const void* storage = a.raw_data();
    uint32_t v = a._version();
    a += tensor<float>({1, 1, 1});
    a -= 1;
    a *= 4;
    a /= 8;
    CHECK(a.to_vector<float>() == std::vector<float>{0.5f, 1, 1.5f});
    CHECK(a.raw_data() == storage);
    CHECK(a._version() == v + 4);
    Tensor w = tensor<double>({1, 2}, {2}).requires_grad_();
    Tensor h = w * 3.0;
    h /= 2;                                            // exact division, recorded: d/dw = 1.5
    h.sum().backward();
    CHECK(w.grad().to_vector<double>() == std::vector<double>{1.5, 1.5});
    Tensor i = tensor<int64_t>({4});
    CHECK_THROWS_AS(i /= 2, DTypeError);               // as libtorch: a float result cannot go in place
}

TEST_CASE("gelu's approximate string: \"none\" is the erf form, \"tanh\" the approximation, others refused") {
    Tensor x = tensor<double>({-1, 0.5, 2}, {3});
    CHECK_CLOSE(gelu(x, "none"), gelu(x, false), kExact);
    CHECK_CLOSE(x.gelu("tanh"), gelu(x, true), kExact);
    CHECK_CLOSE(F::gelu(x, F::GELUFuncOptions().approximate("tanh")), gelu(x, true), kExact);
    CHECK_CLOSE(F::gelu(x, "none"), gelu(x, false), kExact);
    CHECK(gelu(x, "none").to_vector<double>() != gelu(x, true).to_vector<double>());   // a literal is not `true`
    CHECK_THROWS_AS(gelu(x, "exact"), ValueError);
}

TEST_CASE("reductions over one int dim equal the Shape forms") {
    Tensor x = arange(6, kFloat32).view({2, 3});
    CHECK(x.sum(1).to_vector<float>() == std::vector<float>{3, 12});
    CHECK(x.sum(-1, true).sizes() == Shape{2, 1});
    CHECK(sum(x, 0).to_vector<float>() == x.sum(Shape{0}).to_vector<float>());
    CHECK(x.mean(1).to_vector<float>() == std::vector<float>{1, 4});
    CHECK(x.amax(0).to_vector<float>() == std::vector<float>{3, 4, 5});
    CHECK(x.amin(-1).to_vector<float>() == std::vector<float>{0, 3});
    CHECK(x.sum({0, 1}).item<float>() == 15);
}

TEST_CASE("in-place methods work on a const handle: grad().zero_() and loops over const parameters") {
    Tensor w = ones({3}, TensorOptions().requires_grad(true));
    (w * 2.0).sum().backward();
    w.grad().zero_();
    CHECK(w.grad().to_vector<float>() == std::vector<float>{0, 0, 0});
    const std::vector<Tensor> params{zeros({2}), zeros({2})};
    for (const Tensor& p : params) p.add_(1.0);
    CHECK(params[1].to_vector<float>() == std::vector<float>{1, 1});
    const Tensor c = ones({2});
    c.sub_(ones({2}), 0.5);
    c.mul_(4);
    CHECK(c.to_vector<float>() == std::vector<float>{2, 2});
}

TEST_CASE("arithmetic and softmax methods, F::linear, ampgrad::softmax, sdpa with std::nullopt") {
    Tensor a = tensor<float>({1, 2}), b = tensor<float>({3, 5});
    CHECK(a.add(b).to_vector<float>() == std::vector<float>{4, 7});
    CHECK(a.sub(b, 2).to_vector<float>() == std::vector<float>{-5, -8});
    CHECK(a.mul(3).to_vector<float>() == std::vector<float>{3, 6});
    CHECK(b.div(a).to_vector<float>() == std::vector<float>{3, 2.5f});
    Tensor x = randn({2, 5});
    CHECK_CLOSE(x.softmax(-1), F::softmax(x, -1), kExact);
    CHECK_CLOSE(ampgrad::log_softmax(x, 1), x.log_softmax(1), kExact);
    Tensor w = randn({3, 5}), bias = randn({3});
    CHECK_CLOSE(F::linear(x, w, bias), linear(x, w, bias), kExact);
    Tensor q = randn({1, 2, 4, 8}), k = randn({1, 2, 4, 8}), v = randn({1, 2, 4, 8});
    CHECK_CLOSE(F::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, true),
                F::scaled_dot_product_attention(q, k, v, true), kExact);
}

TEST_CASE("std::cout << tensor prints the values and libtorch's footer; dtypes and devices print too") {
    std::ostringstream os;
    os << tensor<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    CHECK(os.str().find("[ CPUFloatType{2,3} ]") != std::string::npos);
    CHECK(os.str().find("6.0000") != std::string::npos);
    std::ostringstream three;
    three << arange(8).view({2, 2, 2});
    CHECK(three.str().find("(1,.,.) =") != std::string::npos);
    CHECK(three.str().find("[ CPULongType{2,2,2} ]") != std::string::npos);
    std::ostringstream scalar, undefined, names;
    scalar << full({}, true);
    CHECK(scalar.str() == "1\n[ CPUBoolType{} ]");
    undefined << Tensor();
    CHECK(undefined.str() == "[ Tensor (undefined) ]");
    names << kBFloat16 << ' ' << Device("cuda:1") << ' ' << kCPU;
    CHECK(names.str() == "BFloat16 cuda:1 cpu");
}
