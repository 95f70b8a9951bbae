// cross_entropy_test.cpp: F::cross_entropy with options (autograd/ops/cross_entropy.cpp): class
// weights, label smoothing, reductions, (N,C,d) inputs, probability targets: PyTorch fixtures to
// second order, f64 gradcheck/gradgradcheck, agreement with the fused path, f16/bf16, bad input.
#include <doctest/doctest.h>

#include <cmath>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
F::Reduction reduction_of(const std::string& r) {
    return r == "none" ? F::Reduction::kNone : (r == "sum" ? F::Reduction::kSum : F::Reduction::kMean);
}

F::CrossEntropyOptions options_of(const Fixture& fx) {
    F::CrossEntropyOptions o;
    if (fx.tensors.count("weight")) o.weight = fx.at("weight");
    o.reduction = reduction_of(fx.params.at("reduction").get<std::string>());
    o.label_smoothing = fx.param("label_smoothing");
    if (fx.params.contains("ignore_index")) o.ignore_index = fx.params.at("ignore_index").get<int64_t>();
    return o;
}
}  // namespace

TEST_CASE("cross_entropy with weight, label_smoothing, reductions and probability targets matches PyTorch") {
    for (const char* name : {"nnf_ce_weight", "nnf_ce_smooth", "nnf_ce_weight_smooth_sum", "nnf_ce_none",
                             "nnf_ce_spatial", "nnf_ce_probs", "nnf_ce_probs_weight_smooth"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        Tensor logits = fx.at("logits").clone().requires_grad_(true);
        Tensor loss = F::cross_entropy(logits, fx.at("targets"), options_of(fx));
        CHECK_CLOSE(loss, fx.at("out"), tol_for(kFloat32));
        Tensor d = autograd::grad({loss}, {logits}, {fx.at("dout")}, true, true)[0];
        CHECK_CLOSE(d, fx.at("dlogits"), tol_for(kFloat32));
        Tensor dd = autograd::grad({(d * fx.at("v")).sum()}, {logits})[0];
        CHECK_CLOSE(dd, fx.at("ddlogits"), tol_for(kFloat32, 16));
    }
}

TEST_CASE("cross_entropy options pass float64 gradcheck and gradgradcheck") {
    manual_seed(43);
    auto opts = TensorOptions(kFloat64).requires_grad(true);
    Tensor logits = randn({4, 5}, opts), weight = rand({5}, TensorOptions(kFloat64)) + 0.5;
    Tensor targets = tensor<int64_t>({4, -100, 0, 2});
    for (F::Reduction r : {F::Reduction::kMean, F::Reduction::kSum, F::Reduction::kNone}) {
        auto f = [&](const tensor_list& in) {
            return tensor_list{F::cross_entropy(in[0], targets, {.weight = weight, .reduction = r,
                                                                 .label_smoothing = 0.15})};
        };
        CHECK(autograd::gradcheck(f, {logits}));
        CHECK(autograd::gradgradcheck(f, {logits}));
    }
    Tensor probs = F::softmax(randn({4, 5}, TensorOptions(kFloat64)), 1).requires_grad_(true);
    auto g = [&](const tensor_list& in) {
        return tensor_list{F::cross_entropy(in[0], in[1], {.weight = weight, .label_smoothing = 0.1})};
    };
    CHECK(autograd::gradcheck(g, {logits, probs}));
    CHECK(autograd::gradgradcheck(g, {logits, probs}));
    Tensor spatial = randn({2, 3, 4}, opts);
    Tensor spatial_targets = tensor<int64_t>({0, 1, 2, -100, 2, 2, 0, 1}, {2, 4});
    auto h = [&](const tensor_list& in) { return tensor_list{F::cross_entropy(in[0], spatial_targets, F::CrossEntropyOptions{})}; };
    CHECK(autograd::gradcheck(h, {spatial}));
}

TEST_CASE("cross_entropy's general path equals the fused path when the options are the defaults") {
    manual_seed(47);
    Tensor logits = randn({5, 7}, TensorOptions(kFloat64));
    Tensor targets = tensor<int64_t>({6, -100, 0, 3, 3});
    Tensor fused = F::cross_entropy(logits, targets);
    Tensor sum = F::cross_entropy(logits, targets, {.reduction = F::Reduction::kSum});
    CHECK(sum.item<double>() == doctest::Approx(fused.item<double>() * 4).epsilon(1e-12));
    Tensor ones_weight = ones({7}, TensorOptions(kFloat64));
    CHECK(F::cross_entropy(logits, targets, {.weight = ones_weight}).item<double>() ==
          doctest::Approx(fused.item<double>()).epsilon(1e-12));
    Tensor none = F::cross_entropy(logits, targets, {.reduction = F::Reduction::kNone});
    CHECK(none.sizes() == Shape{5});
    CHECK(none.to_vector<double>()[1] == 0.0);                             // ignored row
}

TEST_CASE("cross_entropy options in f16/bf16 stay within dtype tolerance of f64") {
    manual_seed(53);
    Tensor targets = tensor<int64_t>({3, 0, 15, -100, 7, 9});
    Tensor weight = rand({16}) + 0.5;
    for (DType dt : {kFloat16, kBFloat16}) {
        CAPTURE(dtype_name(dt));
        Tensor logits = randn({6, 16}).to(dt);
        F::CrossEntropyOptions o{.weight = weight.to(dt), .label_smoothing = 0.1};
        Tensor got = F::cross_entropy(logits, targets, o);
        F::CrossEntropyOptions o64{.weight = weight.to(dt).to(kFloat64), .label_smoothing = 0.1};
        Tensor ref = F::cross_entropy(logits.to(kFloat64), targets, o64);
        CHECK(got.dtype() == dt);
        CHECK_CLOSE(got, ref, tol_for(dt, 16));
    }
}

TEST_CASE("cross_entropy options reject bad input") {
    Tensor logits = zeros({3, 4});
    Tensor t = tensor<int64_t>({0, 1, 2});
    CHECK_THROWS_WITH_AS(F::cross_entropy(logits, t, {.label_smoothing = 1.5}),
                         doctest::Contains("label_smoothing must be between 0.0 and 1.0"), ValueError);
    CHECK_THROWS_WITH_AS(F::cross_entropy(logits, t, {.weight = ones({3})}),
                         doctest::Contains("weight tensor should be defined either for all 4 classes"), ShapeError);
    CHECK_THROWS_WITH_AS(F::cross_entropy(logits, tensor<int64_t>({0, 4, 1}), {.reduction = F::Reduction::kSum}),
                         doctest::Contains("target 4 is out of bounds"), IndexError);
    CHECK_THROWS_WITH_AS(F::cross_entropy(logits, zeros({3, 4}), {.ignore_index = 1}),
                         doctest::Contains("ignore_index (1) is not supported for probability targets"), ValueError);
    CHECK_THROWS_AS(F::cross_entropy(logits, zeros({3, 4}, TensorOptions(kInt64)), F::CrossEntropyOptions{}), DTypeError);
    CHECK_THROWS_AS(F::cross_entropy(logits, tensor<int64_t>({0, 1}), {.label_smoothing = 0.1}), ShapeError);
}

namespace {
// Loss, gradient and second gradient of one form against the fixture.
void check_form(const Fixture& fx, const std::function<Tensor(const Tensor&)>& loss_of) {
    Tensor logits = fx.at("logits").clone().requires_grad_(true);
    Tensor loss = loss_of(logits);
    CHECK_CLOSE(loss, fx.at("out"), tol_for(kFloat32));
    Tensor d = autograd::grad({loss}, {logits}, {fx.at("dout")}, true, true)[0];
    CHECK_CLOSE(d, fx.at("dlogits"), tol_for(kFloat32));
    Tensor dd = autograd::grad({(d * fx.at("v")).sum()}, {logits})[0];
    CHECK_CLOSE(dd, fx.at("ddlogits"), tol_for(kFloat32, 16));
}
}  // namespace

TEST_CASE("cross_entropy (N,C,d1,d2) and probability targets: both forms match PyTorch and each other") {
    for (const char* name : {"nnf_ce_spatial_plain", "nnf_ce_spatial_ignore4", "nnf_ce_spatial_sum",
                             "nnf_ce_spatial_none", "nnf_ce_spatial_probs"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        const F::CrossEntropyOptions o = options_of(fx);
        check_form(fx, [&](const Tensor& logits) { return F::cross_entropy(logits, fx.at("targets"), o); });
        if (o.reduction != F::Reduction::kMean) continue;                         // the short form is the mean
        check_form(fx, [&](const Tensor& logits) { return F::cross_entropy(logits, fx.at("targets"), o.ignore_index); });
        Tensor short_form = F::cross_entropy(fx.at("logits"), fx.at("targets"), o.ignore_index);
        Tensor options_form = F::cross_entropy(fx.at("logits"), fx.at("targets"), o);
        CHECK(short_form.item<double>() == options_form.item<double>());            // one path: the same bits
    }
    Fixture probs = load_fixture("nnf_ce_probs");                                  // (N,C) probabilities
    check_form(probs, [&](const Tensor& logits) { return F::cross_entropy(logits, probs.at("targets")); });
}

TEST_CASE("cross_entropy short form: (N,C,d) targets of the wrong shape get a typed error") {
    Tensor logits = zeros({2, 5, 3});
    CHECK_THROWS_AS(F::cross_entropy(logits, zeros({2, 4}, TensorOptions(kInt64))), ShapeError);
    CHECK_THROWS_AS(F::cross_entropy(logits, zeros({2, 5, 4})), DTypeError);   // not probabilities: must be indices
}
