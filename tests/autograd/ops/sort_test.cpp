// sort_test.cpp: autograd/ops/sort.cpp: sort, argsort and topk against PyTorch fixtures (values,
// indices and the gradient of the values, with ties and NaN/inf), f64 gradcheck and gradgradcheck,
// dtypes kept (ints, bool, f16/bf16 exact: the ops only move elements), 0-d, empty and
// non-contiguous inputs, and bad input.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

const Tolerance kExact{0, 0};

// values, indices and dx of a (values, indices) op against its fixture
void check_fixture(const std::string& name, const std::function<std::pair<Tensor, Tensor>(const Tensor&)>& fn) {
    CAPTURE(name);
    Fixture fx = load_fixture(name);
    Tensor x = fx.at("x").clone().requires_grad_(true);
    auto [values, indices] = fn(x);
    CHECK_CLOSE(values, fx.at("values"), kExact);
    CHECK(indices.dtype() == kInt64);
    CHECK(indices.to_vector<int64_t>() == fx.at("indices").to_vector<int64_t>());
    values.backward(fx.at("dy"));
    CHECK_CLOSE(x.grad(), fx.at("dx"), kExact);                  // each gradient lands on one element
}

bool flag(const Fixture& fx, const char* name) { return fx.params.at(name).get<bool>(); }

}  // namespace

TEST_CASE("sort matches torch.sort(stable=True): ties in index order, NaN largest, both directions") {
    for (const char* name : {"sort_ties_asc", "sort_ties_desc", "sort_nan_asc", "sort_nan_desc", "sort_dim0_asc",
                             "sort_dim0_desc", "sort_3d_middle_desc"}) {
        Fixture fx = load_fixture(name);
        const int64_t dim = fx.params.at("dim").get<int64_t>();
        const bool desc = flag(fx, "descending");
        check_fixture(name, [&](const Tensor& x) { return sort(x, dim, desc, true); });
        Tensor x = fx.at("x");
        CHECK(argsort(x, dim, desc).to_vector<int64_t>() == fx.at("indices").to_vector<int64_t>());
        CHECK(x.sort(dim, desc).second.to_vector<int64_t>() == fx.at("indices").to_vector<int64_t>());
    }
}

TEST_CASE("topk matches torch.topk: values, indices and gradient (no ties)") {
    for (const char* name : {"sampling_topk_last", "sampling_topk_dim0_smallest", "sampling_topk_3d_middle"}) {
        Fixture fx = load_fixture(name);
        const int64_t k = fx.params.at("k").get<int64_t>(), dim = fx.params.at("dim").get<int64_t>();
        const bool largest = flag(fx, "largest");
        check_fixture(name, [&](const Tensor& x) { return x.topk(k, dim, largest); });
    }
}

// PyTorch's topk leaves the order of equal values to its selection algorithm (its fixtures show
// index 7 before 0 for two 2.0s), so with ties only the values are PyTorch's; our indices are the
// stable order, and each points at its value.
TEST_CASE("topk with ties and NaN: torch's values, NaN largest, indices in index order among ties") {
    for (const char* name : {"topk_ties_largest", "topk_ties_smallest", "topk_nan_largest", "topk_nan_smallest"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        const int64_t k = fx.params.at("k").get<int64_t>();
        Tensor x = fx.at("x");                                                   // (R,N), dim = last
        auto [values, indices] = topk(x, k, -1, flag(fx, "largest"));
        CHECK_CLOSE(values, fx.at("values"), kExact);
        auto xs = x.to_vector<float>();
        auto vs = values.to_vector<float>();
        auto is = indices.to_vector<int64_t>();
        const int64_t N = x.size(1);
        for (size_t i = 0; i < is.size(); ++i) {
            const float at = xs[(i / k) * N + is[i]];
            CHECK(((std::isnan(at) && std::isnan(vs[i])) || at == vs[i]));
            if (i % k != 0 && (vs[i] == vs[i - 1] || (std::isnan(vs[i]) && std::isnan(vs[i - 1]))))
                CHECK(is[i] > is[i - 1]);                                         // ties: index order
        }
    }
}

TEST_CASE("sort and topk: f64 gradcheck and gradgradcheck") {
    manual_seed(25);
    Tensor x = randn({3, 5, 4}, TensorOptions(kFloat64).requires_grad(true));   // distinct values
    auto sorted = [](const tensor_list& t) { return tensor_list{sort(t[0], 1, true).first}; };
    auto top = [](const tensor_list& t) { return tensor_list{topk(t[0], 2, -1, false).first}; };
    CHECK(autograd::gradcheck(sorted, {x}));
    CHECK(autograd::gradgradcheck(sorted, {x}));
    CHECK(autograd::gradcheck(top, {x}));
    CHECK(autograd::gradgradcheck(top, {x}));
}

TEST_CASE("sort keeps every dtype and moves f16/bf16 values exactly") {
    Tensor ints = tensor<int64_t>({5, -2, 9, -2, 0}, {5});
    auto [iv, ii] = sort(ints);
    CHECK(iv.dtype() == kInt64);
    CHECK(iv.to_vector<int64_t>() == std::vector<int64_t>{-2, -2, 0, 5, 9});
    CHECK(ii.to_vector<int64_t>() == std::vector<int64_t>{1, 3, 4, 0, 2});
    Tensor flags = tensor<bool>({true, false, true}, {3});                         // as torch: false < true
    auto [bv, bi] = sort(flags, 0, false, true);
    CHECK(bv.dtype() == kBool);
    CHECK(bi.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 2});
    manual_seed(7);
    Tensor x = randn({4, 6});
    for (DType dtype : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dtype));
        Tensor low = x.to(dtype);
        auto [v, i] = sort(low, -1, true);
        auto [v64, i64] = sort(low.to(kFloat64), -1, true);
        CHECK(v.dtype() == dtype);
        CHECK_CLOSE(v, v64, kExact);
        CHECK(i.to_vector<int64_t>() == i64.to_vector<int64_t>());
    }
}

TEST_CASE("sort, argsort and topk on 0-d, empty and non-contiguous inputs") {
    auto [v0, i0] = sort(full({}, 3.0));                                          // 0-d: itself and index 0
    CHECK(v0.dim() == 0);
    CHECK(v0.item<double>() == 3.0);
    CHECK(i0.item<int64_t>() == 0);
    CHECK(topk(full({}, 3.0), 1).second.item<int64_t>() == 0);
    auto [ve, ie] = sort(zeros({2, 0, 3}), 1);
    CHECK(ve.sizes() == Shape{2, 0, 3});
    CHECK(ie.sizes() == Shape{2, 0, 3});
    CHECK(topk(zeros({2, 3}), 0).first.sizes() == Shape{2, 0});
    Tensor base = tensor<float>({3, 1, 2, 6, 5, 4}, {2, 3});
    Tensor t = base.transpose(0, 1);                                               // (3,2), strides (1,3)
    CHECK(sort(t, 0).first.contiguous().to_vector<float>() == std::vector<float>{1, 4, 2, 5, 3, 6});
    CHECK(argsort(t, -1, true).contiguous().to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1, 0, 1, 0});
}

TEST_CASE("sort and topk reject bad input with typed errors") {
    Tensor x = zeros({2, 3});
    CHECK_THROWS_AS(sort(x, 2), IndexError);
    CHECK_THROWS_AS(argsort(x, -3), IndexError);
    CHECK_THROWS_WITH_AS(topk(x, 4), doctest::Contains("topk: k = 4 is out of range"), IndexError);
    CHECK_THROWS_AS(topk(x, -1), IndexError);
    CHECK_THROWS_AS(sort(Tensor()), Error);
}
