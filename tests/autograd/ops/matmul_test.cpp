// matmul_test.cpp: matmul (all numpy-semantics cases), mm, bmm, linear: PyTorch fixtures (forward +
// backward), f64 gradcheck and gradgradcheck, f16/bf16 against f64, strided/transposed operands,
// and bad input. The gemm kernel itself is covered in tests/cpu/gemm_test.cpp.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

using BinaryFn = std::function<Tensor(const Tensor&, const Tensor&)>;

// Fixture with inputs a, b (or x, w[, b]): check y and every input gradient.
void check_fixture(const std::string& name, const std::vector<std::string>& inputs,
                   const std::function<Tensor(const tensor_list&)>& fn) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    tensor_list leaves;
    for (const std::string& in : inputs) leaves.push_back(fx.at(in).clone().requires_grad_(true));
    Tensor y = fn(leaves);
    y.backward(fx.at("dy"));
    CHECK_CLOSE(y, fx.at("y"), tol_for(kFloat32));
    for (size_t i = 0; i < inputs.size(); ++i) {
        CAPTURE(inputs[i]);
        CHECK_CLOSE(leaves[i].grad(), fx.at("d" + inputs[i]), tol_for(kFloat32));
    }
}

void check_binary_fixture(const std::string& name, const BinaryFn& fn) {
    check_fixture(name, {"a", "b"}, [&](const tensor_list& in) { return fn(in[0], in[1]); });
}

tensor_list randn_f64(const std::vector<Shape>& shapes) {
    tensor_list out;
    for (const Shape& s : shapes) out.push_back(randn(s, TensorOptions(kFloat64).requires_grad(true)));
    return out;
}

void check_gradcheck(const BinaryFn& fn, const Shape& a, const Shape& b) {
    CAPTURE(shape_str(a));
    CAPTURE(shape_str(b));
    manual_seed(13);
    tensor_list in = randn_f64({a, b});
    auto f = [&](const tensor_list& t) { return tensor_list{fn(t[0], t[1])}; };
    CHECK(autograd::gradcheck(f, in));
    CHECK(autograd::gradgradcheck(f, in));
}

// Forward and backward in f16/bf16 against f64 on the same rounded inputs.
void check_low_precision(const BinaryFn& fn, const Shape& a_shape, const Shape& b_shape) {
    manual_seed(17);
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor a = randn(a_shape).to(dt).requires_grad_(true), b = randn(b_shape).to(dt).requires_grad_(true);
        Tensor a64 = a.detach().to(kFloat64).requires_grad_(true), b64 = b.detach().to(kFloat64).requires_grad_(true);
        Tensor y = fn(a, b), y64 = fn(a64, b64);
        CHECK(y.dtype() == dt);
        Tensor dy = randn(y.sizes()).to(dt);
        y.backward(dy);
        y64.backward(dy.to(kFloat64));
        // inputs are the same rounded values; f16/bf16 gemm accumulates in f32 and rounds once on store
        CHECK_CLOSE(y, y64, tol_for(dt, 2));
        CHECK(a.grad().dtype() == dt);
        CHECK_CLOSE(a.grad(), a64.grad(), tol_for(dt, 2));
        CHECK_CLOSE(b.grad(), b64.grad(), tol_for(dt, 2));
    }
}

}  // namespace

TEST_CASE("matmul, mm, bmm and linear match PyTorch forward and backward") {
    auto mat = [](const Tensor& a, const Tensor& b) { return matmul(a, b); };
    check_binary_fixture("matmul_2d_2d", mat);
    check_binary_fixture("matmul_nd_2d", mat);
    check_binary_fixture("matmul_2d_nd", mat);
    check_binary_fixture("matmul_broadcast_batch", mat);
    check_binary_fixture("matmul_1d_1d", mat);
    check_binary_fixture("matmul_1d_nd", mat);
    check_binary_fixture("matmul_nd_1d", mat);
    check_binary_fixture("matmul_mm", [](const Tensor& a, const Tensor& b) { return mm(a, b); });
    check_binary_fixture("matmul_bmm", [](const Tensor& a, const Tensor& b) { return bmm(a, b); });
    check_fixture("matmul_linear", {"x", "w", "b"}, [](const tensor_list& in) { return linear(in[0], in[1], in[2]); });
    check_fixture("matmul_linear_1d_nobias", {"x", "w"}, [](const tensor_list& in) { return linear(in[0], in[1]); });
}

TEST_CASE("matmul output shapes follow numpy semantics") {
    auto shape_of = [](const Shape& a, const Shape& b) { return matmul(zeros(a), zeros(b)).sizes(); };
    CHECK(shape_of({4}, {4}) == Shape{});
    CHECK(shape_of({4}, {4, 5}) == Shape{5});
    CHECK(shape_of({3, 4}, {4}) == Shape{3});
    CHECK(shape_of({7, 1, 3, 4}, {5, 4, 2}) == Shape{7, 5, 3, 2});
    CHECK(shape_of({2, 3, 4}, {4}) == Shape{2, 3});
    CHECK(shape_of({4}, {6, 4, 2}) == Shape{6, 2});
    CHECK(shape_of({0, 3, 4}, {4, 2}) == Shape{0, 3, 2});
    CHECK(shape_of({3, 0}, {0, 2}) == Shape{3, 2});
    CHECK(matmul(ones({3, 0}), ones({0, 2})).sum().item<double>() == 0.0);   // empty inner dim gives zeros
}

TEST_CASE("matmul family passes float64 gradcheck and gradgradcheck") {
    auto mat = [](const Tensor& a, const Tensor& b) { return matmul(a, b); };
    check_gradcheck(mat, {3, 4}, {4, 2});
    check_gradcheck(mat, {2, 3, 4}, {4, 2});
    check_gradcheck(mat, {3, 4}, {2, 4, 2});
    check_gradcheck(mat, {2, 1, 3, 4}, {3, 4, 2});
    check_gradcheck(mat, {4}, {4});
    check_gradcheck(mat, {4}, {2, 4, 3});
    check_gradcheck(mat, {2, 3, 4}, {4});
    check_gradcheck([](const Tensor& a, const Tensor& b) { return mm(a, b); }, {3, 4}, {4, 2});
    check_gradcheck([](const Tensor& a, const Tensor& b) { return bmm(a, b); }, {2, 3, 4}, {2, 4, 2});
    // transposed and sliced operands reach gemm as strided views
    check_gradcheck([](const Tensor& a, const Tensor& b) { return matmul(a.transpose(-1, -2), b.narrow(1, 1, 2)); },
                    {2, 4, 3}, {4, 5});
    manual_seed(19);
    tensor_list in = randn_f64({{2, 3, 4}, {5, 4}, {5}});
    auto lin = [](const tensor_list& t) { return tensor_list{linear(t[0], t[1], t[2])}; };
    CHECK(autograd::gradcheck(lin, in));
    CHECK(autograd::gradgradcheck(lin, in));
    tensor_list in1 = randn_f64({{4}, {3, 4}});
    CHECK(autograd::gradcheck([](const tensor_list& t) { return tensor_list{linear(t[0], t[1])}; }, in1));
}

TEST_CASE("matmul family in f16/bf16 stays within dtype tolerance of f64") {
    check_low_precision([](const Tensor& a, const Tensor& b) { return matmul(a, b); }, {2, 3, 32}, {32, 5});
    check_low_precision([](const Tensor& a, const Tensor& b) { return bmm(a, b); }, {2, 3, 32}, {2, 32, 5});
    check_low_precision([](const Tensor& a, const Tensor& b) { return linear(a, b); }, {4, 32}, {6, 32});
    check_low_precision([](const Tensor& a, const Tensor& b) { return matmul(a.transpose(0, 1), b); }, {32, 3},
                        {32, 5});
}

TEST_CASE("matmul reads transposed, expanded and sliced operands correctly") {
    manual_seed(23);
    Tensor a = randn({5, 4}, TensorOptions(kFloat64)), b = randn({3, 5}, TensorOptions(kFloat64));
    Tensor expected = matmul(a.t().contiguous(), b.t().contiguous());                   // (4,3)
    CHECK_CLOSE(matmul(a.t(), b.t()), expected, tol_for(kFloat64));
    Tensor row = randn({1, 4}, TensorOptions(kFloat64));
    Tensor rows = row.expand({6, 4});                                                    // stride-0 rows
    CHECK_CLOSE(matmul(rows, a.t()), matmul(rows.contiguous(), a.t().contiguous()), tol_for(kFloat64));
    Tensor wide = randn({5, 8}, TensorOptions(kFloat64));
    Tensor every_other = wide.view({5, 4, 2}).select(2, 0);                              // column stride 2
    CHECK_CLOSE(matmul(every_other.t(), a), matmul(every_other.t().contiguous(), a), tol_for(kFloat64));
    Tensor batch = randn({3, 2, 4, 5}, TensorOptions(kFloat64)).permute({1, 0, 2, 3});  // batch dims not mergeable
    CHECK_CLOSE(matmul(batch, b.t()), matmul(batch.contiguous(), b.t()), tol_for(kFloat64));
    Tensor w_store = randn({4, 5}, TensorOptions(kFloat64));
    Tensor w = w_store.t();                                                              // (5,4) column-major
    Tensor x = batch.transpose(-1, -2);                                                  // (2,3,5,4)
    CHECK_CLOSE(linear(x, w), matmul(x.contiguous(), w_store), tol_for(kFloat64));
}

TEST_CASE("linear backward matches the matmul composition") {
    manual_seed(29);
    Tensor x = randn({2, 3, 4}, TensorOptions(kFloat64).requires_grad(true));
    Tensor w = randn({5, 4}, TensorOptions(kFloat64).requires_grad(true));
    Tensor b = randn({5}, TensorOptions(kFloat64).requires_grad(true));
    linear(x, w, b).sum().backward();             // the upstream gradient is a stride-0 expand
    Tensor x2 = x.detach().requires_grad_(true), w2 = w.detach().requires_grad_(true);
    Tensor b2 = b.detach().requires_grad_(true);
    (matmul(x2, w2.t()) + b2).sum().backward();
    CHECK_CLOSE(x.grad(), x2.grad(), tol_for(kFloat64));
    CHECK_CLOSE(w.grad(), w2.grad(), tol_for(kFloat64));
    CHECK_CLOSE(b.grad(), b2.grad(), tol_for(kFloat64));
}

TEST_CASE("matmul family rejects bad input with typed errors") {
    Tensor a = zeros({2, 3}), b = zeros({4, 5});
    CHECK_THROWS_WITH_AS(matmul(a, b),
                         doctest::Contains("matmul: inner dimensions differ: a is (2,3) f32 cpu, b is (4,5) f32 cpu; "
                                           "expected a.shape[-1] == b.shape[-2] (3 != 4)"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({3}), zeros({4})), doctest::Contains("b.shape[0] (3 != 4)"), ShapeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({2, 3, 4}), zeros({3, 4, 5})),
                         doctest::Contains("matmul: batch dimensions cannot be broadcast"), ShapeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({}), zeros({3})), doctest::Contains("at least 1 dimension"), ShapeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({2, 3}), zeros({3, 2}, TensorOptions(kFloat64))),
                         doctest::Contains("matmul: dtypes differ: a is (2,3) f32 cpu, b is (3,2) f64 cpu"),
                         DTypeError);
    CHECK_THROWS_WITH_AS(matmul(zeros({2, 3}, TensorOptions(kInt64)), zeros({3, 2}, TensorOptions(kInt64))),
                         doctest::Contains("matmul: expected floating tensors"), DTypeError);
    CHECK_THROWS_WITH_AS(matmul(Tensor(), a), doctest::Contains("matmul: argument 'a' is an undefined tensor"),
                         ValueError);
    CHECK_THROWS_WITH_AS(mm(zeros({2, 3, 4}), zeros({4, 5})), doctest::Contains("mm: expected 2-D tensors"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(mm(a, b), doctest::Contains("mm: inner dimensions differ"), ShapeError);
    CHECK_THROWS_WITH_AS(bmm(zeros({2, 3, 4}), zeros({3, 4, 5})),
                         doctest::Contains("bmm: batch sizes differ: a is (2,3,4) f32 cpu, b is (3,4,5) f32 cpu "
                                           "(2 != 3)"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(bmm(a, b), doctest::Contains("bmm: expected 3-D tensors"), ShapeError);
    CHECK_THROWS_WITH_AS(linear(zeros({2, 3}), zeros({5, 4})),
                         doctest::Contains("linear: in_features differ: x is (2,3) f32 cpu, weight is (5,4) f32 cpu; "
                                           "expected x.shape[-1] == weight.shape[1] (3 != 4)"),
                         ShapeError);
    CHECK_THROWS_WITH_AS(linear(zeros({2, 4}), zeros({5, 4}), zeros({4})),
                         doctest::Contains("linear: expected x (*,K), weight (N,K) and bias (N)"), ShapeError);
    CHECK_THROWS_WITH_AS(linear(zeros({2, 4}), zeros({5, 4}), zeros({5}, TensorOptions(kFloat16))),
                         doctest::Contains("linear: dtypes differ: x is (2,4) f32 cpu, bias is (5) f16 cpu"),
                         DTypeError);
}
