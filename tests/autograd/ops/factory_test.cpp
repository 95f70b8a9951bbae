// factory_test.cpp: which dtype each factory picks (autograd/ops/factory.cpp), as libtorch does:
// options with no dtype leave it to the factory (tensor's element type, arange's and full's
// arguments, randint's int64, the *_like model tensor), options with one set it, and the other
// fields (device, requires_grad) merge field by field. Also the extra spellings: arange(start, end),
// randint(high, shape), full with an integral or bool value.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;

TEST_CASE("tensor(std::vector<T>, shape, options) keeps T's dtype unless the options name one") {
    Tensor x = tensor(std::vector<double>{0.1, 0.2, 0.3}, {3}, TensorOptions().requires_grad(true));
    CHECK(x.dtype() == kFloat64);
    CHECK(x.requires_grad());
    CHECK(tensor(std::vector<int64_t>{1, 2}, {2}, TensorOptions().device(kCPU)).dtype() == kInt64);
    CHECK(tensor(std::vector<int32_t>{1, 2}, {2}, TensorOptions()).dtype() == kInt32);
    CHECK(tensor(std::vector<bool>{true, false}, {2}, TensorOptions()).dtype() == kBool);
    CHECK(tensor(std::vector<double>{1.5}, {1}, TensorOptions(kFloat32)).dtype() == kFloat32);
    CHECK(tensor(std::vector<bool>{true, false}, {2}, TensorOptions(kFloat32)).to_vector<float>() ==
          std::vector<float>{1, 0});
    // the case that made gradcheck refuse a user's f64 input: options carrying only requires_grad
    CHECK(autograd::gradcheck([](const tensor_list& in) { return tensor_list{in[0] * in[0]}; }, {x}));
}

TEST_CASE("arange: int64 when every bound is an integer, f32 otherwise, the options' dtype when set") {
    CHECK(arange(5).dtype() == kInt64);
    CHECK(arange(5, TensorOptions().device(kCPU)).dtype() == kInt64);
    CHECK(arange(5, kFloat32).to_vector<float>() == std::vector<float>{0, 1, 2, 3, 4});
    CHECK(arange(2, 5).to_vector<int64_t>() == std::vector<int64_t>{2, 3, 4});
    CHECK(arange(0, 10, 3).to_vector<int64_t>() == std::vector<int64_t>{0, 3, 6, 9});
    CHECK(arange(10, 0, -3).to_vector<int64_t>() == std::vector<int64_t>{10, 7, 4, 1});
    Tensor halves = arange(2.5);                                        // a floating bound: f32, [0, 1, 2]
    CHECK(halves.dtype() == kFloat32);
    CHECK(halves.to_vector<float>() == std::vector<float>{0, 1, 2});
    CHECK(arange(0.0, 1.0, 0.25).to_vector<float>() == std::vector<float>{0, 0.25f, 0.5f, 0.75f});
    CHECK(arange(0, 3, 1, kFloat64).dtype() == kFloat64);
    CHECK_THROWS_AS(arange(0, 3, 0), ValueError);
    CHECK_THROWS_AS(arange(-1), ValueError);
}

TEST_CASE("randint is int64 unless told otherwise; randint(high, shape) starts at 0") {
    manual_seed(3);
    Tensor k = randint(0, 5, {64}, TensorOptions().device(kCPU));
    CHECK(k.dtype() == kInt64);
    Tensor logits = zeros({64, 5});
    CHECK(F::cross_entropy(logits, k).item<double>() == doctest::Approx(std::log(5.0)));   // int64 targets accepted
    Tensor h = randint(3, {1000});
    CHECK(h.dtype() == kInt64);
    for (int64_t v : h.to_vector<int64_t>()) CHECK((v >= 0 && v < 3));
    CHECK(randint(0, 5, {4}, kFloat32).dtype() == kFloat32);
}

TEST_CASE("full infers int64 from an integral value and bool from a bool, as libtorch's full") {
    CHECK(full({2, 2}, 5).dtype() == kInt64);
    CHECK(full({2, 2}, 5).to_vector<int64_t>() == std::vector<int64_t>{5, 5, 5, 5});
    CHECK(full({2}, true).dtype() == kBool);
    CHECK(full({2}, 2.5).dtype() == kFloat32);
    CHECK(full({2}, 5, kFloat64).dtype() == kFloat64);
}

TEST_CASE("zeros_like / ones_like merge the options into the model tensor's, field by field") {
    Tensor base = zeros({2, 3}, kFloat64);
    Tensor z = zeros_like(base, TensorOptions().requires_grad(true));
    CHECK(z.dtype() == kFloat64);
    CHECK(z.requires_grad());
    CHECK(z.sizes() == Shape{2, 3});
    CHECK(ones_like(base, kInt32).dtype() == kInt32);
    CHECK(ones_like(base).dtype() == kFloat64);
    CHECK(!ones_like(base).requires_grad());
}

TEST_CASE("TensorOptions: unset fields answer the defaults; merge_in takes the set ones; libtorch shorthands") {
    TensorOptions none;
    CHECK(!none.has_dtype());
    CHECK(!none.has_device());
    CHECK(!none.has_requires_grad());
    CHECK(none.dtype() == kFloat32);
    CHECK(none.device() == Device(kCPU));
    CHECK(!none.requires_grad());
    TensorOptions merged = TensorOptions(kFloat64).merge_in(TensorOptions().requires_grad(true));
    CHECK(merged.dtype() == kFloat64);
    CHECK(merged.requires_grad());
    CHECK(ampgrad::dtype(kFloat64).requires_grad(true).requires_grad());
    CHECK(ampgrad::dtype<double>().dtype() == kFloat64);
    CHECK(TensorOptions().dtype<int64_t>().dtype() == kInt64);
    CHECK(zeros({2}, ampgrad::requires_grad()).requires_grad());
    CHECK(kFloat == kFloat32);
    CHECK(kDouble == kFloat64);
    CHECK(kHalf == kFloat16);
    CHECK(kLong == kInt64);
    CHECK(kInt == kInt32);
}

// libtorch's braced and scalar forms. A braced list is a std::vector<T> (T's dtype, so that the
// explicit tensor<double>({...}) stays f64); a number is libtorch's torch::tensor(3.5), a 0-dim f32.
TEST_CASE("tensor({...}) and tensor(scalar): libtorch's forms; one integer is a 1-d size") {
    Tensor a = tensor({1.0, 2.0, 3.0, 4.0}, {2, 2});
    CHECK(a.dtype() == kFloat64);
    CHECK(a.sizes() == Shape{2, 2});
    CHECK(a.to_vector<float>() == std::vector<float>{1, 2, 3, 4});
    CHECK(tensor<double>({1, 2}).dtype() == kFloat64);
    CHECK(tensor({1.f, 2.f}).dtype() == kFloat32);
    CHECK(tensor({1.f, 2.f}, {2}, kBFloat16).dtype() == kBFloat16);
    CHECK(tensor({int64_t{1}, int64_t{2}}).dtype() == kInt64);
    CHECK(tensor({true, false}).dtype() == kBool);
    Tensor d = tensor({0.1, 1.0, 1e-4}, TensorOptions().dtype(kFloat64).requires_grad(true));
    CHECK(d.dtype() == kFloat64);
    CHECK(d.requires_grad());
    CHECK(d.to_vector<double>()[0] == 0.1);
    CHECK(tensor({0.5, 1.5}, kFloat64).dtype() == kFloat64);
    Tensor s = tensor(3.5);
    CHECK(s.dim() == 0);
    CHECK(s.dtype() == kFloat32);
    CHECK(s.item<float>() == 3.5f);
    CHECK(tensor(7).dtype() == kInt64);
    CHECK(tensor(std::vector<double>{1, 2}, TensorOptions().requires_grad(true)).sizes() == Shape{2});
    CHECK(ones(5).sizes() == Shape{5});
    CHECK(zeros(3, kFloat64).dtype() == kFloat64);
    CHECK(randn(4).sizes() == Shape{4});
    CHECK(rand(int64_t{2}).sizes() == Shape{2});
    CHECK(empty(0).numel() == 0);
    CHECK(zeros({}).dim() == 0);                       // a braced list stays a Shape: 0-dim
    CHECK(zeros({5}).sizes() == Shape{5});
    CHECK(full({}, 2.0).dim() == 0);
}
