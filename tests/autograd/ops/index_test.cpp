// index_test.cpp: autograd/ops/index.cpp: gather, scatter (tensor and value forms), scatter_add,
// index_select and index_add against PyTorch 2.15 fixtures (values and gradients, int64 and int32
// indices), f64 gradcheck and gradgradcheck, f16/bf16 against PyTorch's own low-precision results,
// PyTorch's edge cases (0-d tensors, empty and non-contiguous indices, an index larger than its
// target in the indexed dim, a src larger than the index), and bad input with typed errors.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

const Tolerance kExact{0, 0};

int64_t dim_of(const Fixture& fx) { return static_cast<int64_t>(fx.param("dim")); }

// y, dx (and dsrc) of an op of x (and src) against its fixture; the forward moves values (exact)
// unless it sums them
void check_fixture(const std::string& name, const std::function<Tensor(const Tensor&, const Tensor&)>& fn,
                   Tolerance forward_tol = kExact) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    Tensor x = fx.at("x").clone().requires_grad_(true);
    bool has_src = fx.tensors.count("src") > 0;
    Tensor src = has_src ? fx.at("src").clone().requires_grad_(true) : Tensor();
    Tensor y = fn(x, src);
    CHECK_CLOSE(y, fx.at("y"), forward_tol);
    y.backward(fx.at("dy"));
    CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(kFloat32));
    if (has_src) CHECK_CLOSE(src.grad(), fx.at("dsrc"), tol_for(kFloat32));
}

bool passes_gradchecks(const std::function<Tensor(const tensor_list&)>& fn, const tensor_list& inputs) {
    auto f = [&](const tensor_list& t) { return tensor_list{fn(t)}; };
    return autograd::gradcheck(f, inputs) && autograd::gradgradcheck(f, inputs);
}

Tensor f64(const Shape& shape, uint64_t seed) {
    manual_seed(seed);
    return randn(shape, TensorOptions(kFloat64).requires_grad(true));
}

Tensor i64(const std::vector<int64_t>& values, const Shape& shape) { return tensor<int64_t>(values, shape); }

}  // namespace

TEST_CASE("gather matches PyTorch: an index smaller than x apart from dim, int64 and int32 indices") {
    for (std::string name : {"index_gather", "index_gather_i32"}) {
        Fixture fx = load_fixture(name);
        check_fixture(name, [&](const Tensor& x, const Tensor&) { return gather(x, dim_of(fx), fx.at("index")); });
    }
}

TEST_CASE("scatter matches PyTorch with a tensor src, a larger src, and a value") {
    Fixture fx = load_fixture("index_scatter");
    check_fixture("index_scatter", [&](const Tensor& x, const Tensor& s) { return scatter(x, 1, fx.at("index"), s); });
    Fixture big = load_fixture("index_scatter_big_src");
    CHECK_CLOSE(scatter(big.at("x"), 1, big.at("index"), big.at("src")), big.at("y"), kExact);
    check_fixture("index_scatter_value",
                  [&](const Tensor& x, const Tensor&) { return x.scatter(1, fx.at("index"), 2.5); });
}

TEST_CASE("scatter_add and index_add match PyTorch, repeated targets summed") {
    Fixture fx = load_fixture("index_scatter_add");
    check_fixture("index_scatter_add", [&](const Tensor& x, const Tensor& s) { return x.scatter_add(0, fx.at("index"), s); },
                  tol_for(kFloat32));
    Fixture add = load_fixture("index_index_add");
    check_fixture("index_index_add", [&](const Tensor& x, const Tensor& s) {
        return x.index_add(1, add.at("index"), s, add.param("alpha"));
    }, tol_for(kFloat32));
}

TEST_CASE("index_select matches PyTorch with repeated, int64 and int32 indices and a negative dim") {
    for (std::string name : {"index_index_select", "index_index_select_i32"}) {
        Fixture fx = load_fixture(name);
        check_fixture(name, [&](const Tensor& x, const Tensor&) { return x.index_select(dim_of(fx), fx.at("index")); });
    }
}

TEST_CASE("scatter_add and index_add in f16/bf16 match PyTorch's own low-precision sums") {
    for (std::string tag : {"f16", "bf16"}) {
        CAPTURE(tag);
        DType dt = tag == "f16" ? kFloat16 : kBFloat16;
        Fixture s = load_fixture("index_scatter_add_" + tag);
        Tensor ys = scatter_add(s.at("x"), 0, s.at("index"), s.at("src"));
        CHECK(ys.dtype() == dt);
        CHECK_CLOSE(ys, s.at("y"), tol_for(dt, 8));           // up to 4 adds into one element, each rounded
        Fixture a = load_fixture("index_index_add_" + tag);
        CHECK_CLOSE(index_add(a.at("x"), 0, a.at("index"), a.at("src")), a.at("y"), tol_for(dt, 8));
        Tensor x = s.at("x");                                  // moves are exact in any dtype
        CHECK_CLOSE(gather(x, 0, s.at("index").narrow(0, 0, 4)).to(kFloat64),
                    gather(x.to(kFloat64), 0, s.at("index").narrow(0, 0, 4)), kExact);
    }
}

TEST_CASE("f16 scatter_add sums in f32 and rounds once; index_add rounds per add (both as PyTorch)") {
    const int64_t n = 5000;
    Tensor ones_h = ones({1, n}, TensorOptions(kFloat16));
    Tensor sum = scatter_add(zeros({1, 1}, TensorOptions(kFloat16)), 1, zeros({1, n}, TensorOptions(kInt64)), ones_h);
    CHECK(sum.dtype() == kFloat16);
    CHECK(sum.item<float>() == 5000.0f);
    Tensor stalled = index_add(zeros({1}, TensorOptions(kFloat16)), 0, zeros({n}, TensorOptions(kInt64)),
                               ones({n}, TensorOptions(kFloat16)));
    CHECK(stalled.item<float>() == 2048.0f);                          // 2048 + 1 rounds back to 2048
}

TEST_CASE("the index ops pass float64 gradcheck and gradgradcheck") {
    Tensor index = i64({2, 0, 1, 1, 3, 0, 0, 2, 2, 1, 0, 3}, {3, 4});   // (3,4) into (4,5) along 0, repeats
    CHECK(passes_gradchecks([&](const tensor_list& t) { return gather(t[0], 0, index) * gather(t[0], 0, index); },
                            {f64({4, 5}, 1)}));
    CHECK(passes_gradchecks([&](const tensor_list& t) { return scatter_add(t[0] * t[0], 0, index, t[1] * t[1]); },
                            {f64({4, 5}, 2), f64({3, 4}, 3)}));
    Tensor unique = i64({2, 0, 1, 3, 3, 2, 0, 1}, {2, 4});          // no repeated target: scatter is smooth
    CHECK(passes_gradchecks([&](const tensor_list& t) { return scatter(t[0] * t[0], 0, unique, t[1] * t[1]); },
                            {f64({4, 4}, 4), f64({3, 5}, 5)}));     // src larger than the index
    CHECK(passes_gradchecks([&](const tensor_list& t) { return scatter(t[0] * t[0], 1, unique, -1.0); },
                            {f64({4, 4}, 6)}));
    Tensor rows = i64({3, 0, 3}, {3});
    CHECK(passes_gradchecks([&](const tensor_list& t) { return index_select(t[0], 0, rows).pow(2.0); },
                            {f64({4, 3}, 7)}));
    CHECK(passes_gradchecks([&](const tensor_list& t) { return index_add(t[0] * t[0], 1, rows, t[1] * t[1], -0.5); },
                            {f64({2, 4}, 8), f64({2, 3}, 9)}));
}

TEST_CASE("the index ops follow PyTorch on 0-d tensors, empty and non-contiguous indices, other dtypes") {
    Tensor s = scalar_tensor(3.0);
    CHECK(gather(s, 0, scalar_tensor(0.0, TensorOptions(kInt64))).dim() == 0);
    CHECK(gather(s, -1, i64({0, 0}, {2})).to_vector<float>() == std::vector<float>{3, 3});
    CHECK(index_select(s, 0, i64({0}, {1})).dim() == 0);
    CHECK(index_add(s, 0, i64({0}, {1}), scalar_tensor(2.0)).item<float>() == 5.0f);
    CHECK(scatter(s, 0, scalar_tensor(0.0, TensorOptions(kInt64)), scalar_tensor(7.0)).item<float>() == 7.0f);

    Tensor x = arange(0.0, 6.0, 1.0).view({2, 3});                  // [[0,1,2],[3,4,5]]
    CHECK(gather(x, 1, zeros({2, 0}, TensorOptions(kInt64))).sizes() == Shape{2, 0});
    CHECK(index_select(x, 0, zeros({0}, TensorOptions(kInt64))).sizes() == Shape{0, 3});
    CHECK(equal(scatter_add(x, 1, zeros({2, 0}, TensorOptions(kInt64)), ones({2, 1})), x));
    CHECK(gather(x, 1, zeros({0, 2, 2}, TensorOptions(kInt64))).sizes() == Shape{0, 2, 2});   // empty: no rank check
    CHECK(equal(scatter(x, 1, zeros({0}, TensorOptions(kInt64)), 1.0), x));
    Tensor src = ones({3}).requires_grad_(true);                     // empty and 0-d indices: src's gradient
    scatter_add(zeros({3}), 0, zeros({0}, TensorOptions(kInt64)), src).sum().backward();
    CHECK(src.grad().to_vector<float>() == std::vector<float>{0, 0, 0});
    src.set_grad(Tensor());
    scatter(zeros({3}), 0, scalar_tensor(2.0, TensorOptions(kInt64)), src).sum().backward();
    CHECK(src.grad().to_vector<float>() == std::vector<float>{1, 0, 0});
    CHECK_THROWS_AS(scatter_add(x, 1, zeros({2, 0}, TensorOptions(kInt64)), ones({2, 1}, TensorOptions(kFloat64))),
                    DTypeError);                                 // src's dtype is checked even then
    Tensor every_other = make_view(i64({2, 9, 0, 9, 1, 9}, {6}), {3}, {2}, 0);   // [2,0,1], stride 2
    CHECK(index_select(x, 1, every_other).to_vector<float>() == std::vector<float>{2, 0, 1, 5, 3, 4});
    Tensor transposed_index = i64({0, 1, 1, 0, 2, 2}, {3, 2}).t();   // (2,3), non-contiguous
    CHECK(gather(x, 1, transposed_index).to_vector<float>() == std::vector<float>{0, 1, 2, 4, 3, 5});
    CHECK(gather(x.t(), 0, i64({1, 0}, {1, 2})).to_vector<float>() == std::vector<float>{1, 3});

    Tensor ints = tensor<int64_t>({0, 1, 2});                       // any dtype moves; a value is truncated
    CHECK(scatter(ints, 0, i64({1}, {1}), 2.7).to_vector<int64_t>() == std::vector<int64_t>{0, 2, 2});
    CHECK(index_add(ints, 0, i64({0}, {1}), tensor<int64_t>({2}), 3.0).to_vector<int64_t>() ==
          std::vector<int64_t>{6, 1, 2});
    CHECK(index_add(ints, 0, i64({0}, {1}), tensor<int64_t>({2}), 1.5).to_vector<int64_t>() ==
          std::vector<int64_t>{2, 1, 2});                           // alpha truncated to 1, as PyTorch
    Tensor flags = zeros({3}, TensorOptions(kBool));
    CHECK(scatter(flags, 0, i64({1}, {1}), 1.0).to(kInt64).to_vector<int64_t>() == std::vector<int64_t>{0, 1, 0});
    CHECK(gather(tensor<bool>({true, false}), 0, i64({1, 0}, {2})).to(kInt64).to_vector<int64_t>() ==
          std::vector<int64_t>{0, 1});
}

TEST_CASE("the index ops reject bad input with typed errors naming the op and the facts") {
    Tensor x = randn({2, 3});
    CHECK_THROWS_WITH_AS(gather(x, 1, i64({5, 0}, {2, 1})),
                         "gather: index 5 is out of bounds for dimension 1 with size 3", IndexError);
    CHECK_THROWS_WITH_AS(gather(x, 1, i64({-1, 0}, {2, 1})),
                         "gather: index -1 is out of bounds for dimension 1 with size 3", IndexError);
    CHECK_THROWS_WITH_AS(scatter(x, 0, i64({2, 1}, {2, 1}), 7.5),
                         "scatter: index 2 is out of bounds for dimension 0 with size 2", IndexError);
    CHECK_THROWS_WITH_AS(index_select(x, 1, i64({3}, {1})),
                         "index_select: index 3 is out of bounds for dimension 1 with size 3", IndexError);
    CHECK_THROWS_WITH_AS(index_add(x, 1, i64({-1, 2}, {2}), ones({2, 2})),
                         "index_add: index -1 is out of bounds for dimension 1 with size 3", IndexError);
    CHECK_THROWS_WITH_AS(scatter_add(x, 1, i64({3}, {1, 1}), ones({1, 1})),
                         doctest::Contains("scatter_add: index 3"), IndexError);
    CHECK_THROWS_WITH_AS(gather(x, 1, ones({2, 1})), doctest::Contains("gather: index must be int64 or int32"),
                         DTypeError);
    CHECK_THROWS_AS(gather(x, 2, i64({0}, {1, 1})), IndexError);
    CHECK_THROWS_WITH_AS(gather(x, 1, i64({0, 0}, {2})), doctest::Contains("as many dims"), ShapeError);
    CHECK_THROWS_WITH_AS(gather(x, 1, i64({0, 0, 0}, {3, 1})), doctest::Contains("no larger than the input"),
                         ShapeError);
    CHECK_THROWS_AS(scatter(x, 1, i64({0, 1, 1, 0}, {2, 2}), ones({2, 1})), ShapeError);   // src smaller
    CHECK_THROWS_WITH_AS(scatter(x, 1, i64({0}, {1, 1}), ones({1, 1}, TensorOptions(kFloat64))),
                         doctest::Contains("dtype"), DTypeError);
    CHECK_THROWS_WITH_AS(index_select(x, 1, i64({1}, {1, 1})), doctest::Contains("vector"), IndexError);
    CHECK_THROWS_AS(index_select(scalar_tensor(1.0), 0, i64({0, 0}, {2})), IndexError);
    CHECK_THROWS_WITH_AS(index_add(x, 1, i64({2, 2}, {2}), ones({2, 3})), doctest::Contains("index_add: source"),
                         ShapeError);
    CHECK_THROWS_AS(index_add(x, 1, i64({2, 2}, {2}), ones({2, 2}, TensorOptions(kFloat64))), DTypeError);
    CHECK_THROWS_AS(index_select(x, 0, Tensor()), Error);
    CHECK_THROWS_WITH_AS(index_select(zeros({0, 3}), 1, i64({3}, {1})),
                         "index_select: index 3 is out of bounds for dimension 1 with size 3", IndexError);   // empty out
}

TEST_CASE("scatter_, scatter_add_ and index_add_ write into self, bump its version, and keep gradients") {
    Tensor t = zeros({2, 3});
    const uint32_t version = t._version();
    t.scatter_(1, i64({2, 0}, {2, 1}), 1.5).scatter_add_(1, i64({2, 2}, {2, 1}), ones({2, 1}));
    t.index_add_(0, i64({1}, {1}), full({1, 3}, 10.0), 0.5);
    CHECK(t._version() > version);
    CHECK(t.to_vector<float>() == std::vector<float>{0, 0, 2.5, 6.5, 5, 6});
    t.scatter_(0, i64({0}, {1, 1}), full({1, 1}, -1.0));
    CHECK(t.to_vector<float>()[0] == -1.0f);

    Tensor w = f64({2, 3}, 31), src = f64({2, 1}, 32);
    Tensor h = w * 1.0;                                              // a non-leaf, written in place
    h.scatter_add_(1, i64({1, 1}, {2, 1}), src * 3.0);
    h.sum().backward();
    CHECK_CLOSE(w.grad(), ones({2, 3}, TensorOptions(kFloat64)), kExact);
    CHECK_CLOSE(src.grad(), full({2, 1}, 3.0, TensorOptions(kFloat64)), kExact);
    Tensor leaf = zeros({3}).requires_grad_(true);
    CHECK_THROWS_AS(leaf.index_add_(0, i64({0}, {1}), ones({1})), AutogradError);
}
