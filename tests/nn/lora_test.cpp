// lora_test.cpp: nn::attach_lora on nn::Linear: PEFT's parameter names, frozen base, B = 0 start,
// the initialisations, the scalings, dropout on the adapter's input only, merge/unmerge, bad input.
#include <doctest/doctest.h>

#include <cmath>

#include "nn/lora.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

std::shared_ptr<nn::Linear> adapted(int64_t in, int64_t out, nn::LoraOptions options, uint64_t seed = 3) {
    manual_seed(seed);
    auto fc = std::make_shared<nn::Linear>(in, out);
    nn::attach_lora(*fc, options);
    return fc;
}

}  // namespace

TEST_CASE("attach_lora registers lora_A and lora_B under PEFT's names and freezes the base") {
    auto fc = adapted(6, 4, {.r = 2, .alpha = 4});
    CHECK(fc->named_parameters().keys() ==
          std::vector<std::string>{"weight", "bias", "lora_A.weight", "lora_B.weight"});
    CHECK(fc->lora->lora_A->weight.sizes() == Shape{2, 6});   // (r,in)
    CHECK(fc->lora->lora_B->weight.sizes() == Shape{4, 2});   // (out,r)
    CHECK_FALSE(fc->weight.requires_grad());
    CHECK_FALSE(fc->bias.requires_grad());
    CHECK(fc->lora->lora_A->weight.requires_grad());
    CHECK(fc->lora->lora_B->weight.requires_grad());
    CHECK_THROWS_WITH_AS(nn::attach_lora(*fc, {.r = 2}), doctest::Contains("already has a LoRA adapter"), ValueError);
}

TEST_CASE("B starts at zero, so the adapted layer first computes the base layer exactly") {
    auto fc = adapted(8, 5, {.r = 4, .alpha = 8});
    Tensor x = randn({3, 8});
    CHECK(compare_tensors(fc->forward(x), linear(x, fc->weight, fc->bias), {0.0, 0.0}) == "");
    CHECK(fc->lora->lora_B->weight.abs().max().item<float>() == 0.0f);
    // PEFT's default A: kaiming_uniform(a = sqrt(5)) = U(-1/sqrt(in), 1/sqrt(in))
    float bound = 1.0f / std::sqrt(8.0f);
    CHECK(fc->lora->lora_A->weight.abs().max().item<float>() <= bound);
    CHECK(fc->lora->lora_A->weight.abs().max().item<float>() > 0.5f * bound);
}

TEST_CASE("gaussian init draws A with std 1/r; init=false leaves B non-zero") {
    auto g = adapted(256, 4, {.r = 4, .init = nn::LoraInit::kGaussian});
    Tensor a = g->lora->lora_A->weight.detach();
    double std_a = std::sqrt((a * a).mean().item<float>());
    CHECK(std_a == doctest::Approx(0.25).epsilon(0.1));
    CHECK(g->lora->lora_B->weight.abs().max().item<float>() == 0.0f);
    auto none = adapted(8, 4, {.r = 2, .init = nn::LoraInit::kNone});
    CHECK(none->lora->lora_B->weight.abs().max().item<float>() > 0.0f);
    CHECK(nn::lora_init_from_string("gaussian") == nn::LoraInit::kGaussian);
    CHECK_THROWS_AS(nn::lora_init_from_string("pissa"), ValueError);
}

TEST_CASE("the update is scale * B A x with scale alpha/r, or alpha/sqrt(r) under rsLoRA") {
    CHECK(nn::LoraOptions{.r = 16, .alpha = 32}.scale() == 2.0);
    CHECK(nn::LoraOptions{.r = 16, .alpha = 32, .use_rslora = true}.scale() == 8.0);
    for (bool rs : {false, true}) {
        CAPTURE(rs);
        auto fc = adapted(6, 4, {.r = 4, .alpha = 6, .use_rslora = rs, .init = nn::LoraInit::kNone});
        Tensor x = randn({2, 3, 6});
        double scale = rs ? 3.0 : 1.5;
        Tensor ba = mm(fc->lora->lora_B->weight.detach(), fc->lora->lora_A->weight.detach());   // (out,in)
        Tensor expected = linear(x, fc->weight.detach() + ba * scale, fc->bias.detach());
        CHECK_CLOSE(fc->forward(x), expected, tol_for(kFloat32));
    }
}

TEST_CASE("backward reaches only A and B (and x), never the frozen weight") {
    auto fc = adapted(6, 4, {.r = 2, .alpha = 2, .init = nn::LoraInit::kNone});
    Tensor x = randn({5, 6}).requires_grad_(true);
    fc->forward(x).sum().backward();
    CHECK_FALSE(fc->weight.grad().defined());
    CHECK_FALSE(fc->bias.grad().defined());
    CHECK(fc->lora->lora_A->weight.grad().defined());
    CHECK(fc->lora->lora_B->weight.grad().defined());
    CHECK(x.grad().defined());
}

TEST_CASE("dropout applies to the adapter's input only, and only in training") {
    auto fc = adapted(64, 8, {.r = 4, .alpha = 4, .dropout = 0.5, .init = nn::LoraInit::kNone});
    Tensor x = randn({16, 64});
    Tensor base = linear(x, fc->weight, fc->bias);
    fc->eval();
    Tensor eval_out = fc->forward(x);
    Tensor no_drop = F::lora_linear(base, x, fc->lora->lora_A->weight, fc->lora->lora_B->weight, 1.0);
    CHECK_CLOSE(eval_out, no_drop, tol_for(kFloat32));
    fc->train();
    manual_seed(9);
    Tensor train_out = fc->forward(x);
    manual_seed(9);
    Tensor dropped = F::dropout(x, 0.5, true);
    Tensor expected = F::lora_linear(base, dropped, fc->lora->lora_A->weight, fc->lora->lora_B->weight, 1.0);
    CHECK_CLOSE(train_out, expected, tol_for(kFloat32));
    CHECK(compare_tensors(train_out, eval_out, tol_for(kFloat32)) != "");   // dropout did something
}

TEST_CASE("merge folds the adapter into W and unmerge restores W to rounding in f32") {
    auto fc = adapted(32, 16, {.r = 4, .alpha = 8, .init = nn::LoraInit::kNone});
    Tensor w0 = fc->weight.detach().clone();
    Tensor x = randn({3, 32});
    Tensor before = fc->forward(x).detach();
    fc->lora->merge(*fc);
    CHECK(fc->lora->merged);
    CHECK_CLOSE(fc->forward(x), before, tol_for(kFloat32));            // the merged layer, adapter skipped
    CHECK_THROWS_AS(fc->lora->merge(*fc), ValueError);
    fc->lora->unmerge(*fc);
    // one f32 rounding of |W| + |scale B A| each way: 2 ulps of the larger
    Tensor ba = mm(fc->lora->lora_B->weight.detach(), fc->lora->lora_A->weight.detach()) * 2.0;
    Tensor bound = (w0.abs() + ba.abs()) * (2.0 * std::ldexp(1.0, -23));
    CHECK(((fc->weight.detach() - w0).abs() - bound).max().item<float>() <= 0.0f);
    CHECK_CLOSE(fc->forward(x), before, tol_for(kFloat32));
    CHECK_THROWS_AS(fc->lora->unmerge(*fc), ValueError);
}

TEST_CASE("merge in bf16 keeps W within the dtype's rounding of each fold") {
    auto fc = adapted(32, 16, {.r = 4, .alpha = 8, .init = nn::LoraInit::kNone});
    fc->to(kBFloat16);
    Tensor w0 = fc->weight.detach().to(kFloat32);
    fc->lora->merge(*fc);
    fc->lora->unmerge(*fc);
    Tensor ba = mm(fc->lora->lora_B->weight.detach().to(kFloat32), fc->lora->lora_A->weight.detach().to(kFloat32)) * 2.0;
    Tensor bound = (w0.abs() + ba.abs()) * (2.0 * std::ldexp(1.0, -8));   // bf16: 8 bits of precision
    CHECK(((fc->weight.detach().to(kFloat32) - w0).abs() - bound).max().item<float>() <= 0.0f);
}

TEST_CASE("attach_lora rejects a bad rank or dropout") {
    nn::Linear fc(4, 4);
    CHECK_THROWS_WITH_AS(nn::attach_lora(fc, {.r = 0}), doctest::Contains("r must be at least 1, got 0"), ValueError);
    CHECK_THROWS_WITH_AS(nn::attach_lora(fc, {.r = 2, .dropout = 1.0}), doctest::Contains("lora_dropout"), ValueError);
    CHECK_FALSE(fc.lora);
}

TEST_CASE("a quantised base (here an fp8 weight) gets f32 adapters, and merge refuses it") {
    nn::init::SkipInitGuard defer;   // an fp8 weight has no random fill
    nn::Linear fc(8, 4, false, TensorOptions(kFloat8_e4m3fn));
    nn::attach_lora(fc, {.r = 2});
    CHECK(fc.lora->lora_A->weight.dtype() == kFloat32);
    CHECK(fc.lora->lora_B->weight.dtype() == kFloat32);
    CHECK_THROWS_WITH_AS(fc.lora->merge(fc), doctest::Contains("LoraAdapter::merge: the base weight is (4,8) float8_e4m3fn"),
                         DTypeError);
    CHECK_FALSE(fc.lora->merged);
}

TEST_CASE("QLoRA: adapters on an NF4 base are f32 and train; merge refuses the NF4 weight until dequantised") {
    nn::Linear fc(64, 8, true);
    Tensor x = randn({3, 64});                                                  // (B,in)
    fc.quantize_nf4();
    const Tensor base_y = fc.forward(x);                                        // x deq(W)^T + b
    nn::attach_lora(fc, {.r = 2, .alpha = 4, .init = nn::LoraInit::kGaussian});
    CHECK(fc.lora->lora_A->weight.dtype() == kFloat32);
    CHECK(fc.lora->lora_A->weight.requires_grad());
    CHECK_FALSE(fc.bias.requires_grad());                                       // the base, bias included, is frozen
    CHECK_CLOSE(fc.forward(x), base_y, (Tolerance{0.0, 0.0}));                 // B = 0: exactly the NF4 layer
    fc.lora->lora_B->weight.detach().fill_(0.5);
    Tensor y = fc.forward(x);
    y.sum().backward();
    CHECK(fc.lora->lora_A->weight.grad().defined());
    CHECK(fc.lora->lora_B->weight.grad().defined());
    CHECK_THROWS_WITH_AS(fc.lora->merge(fc), doctest::Contains("the base weight is NF4"), DTypeError);
    fc.dequantize();
    fc.lora->merge(fc);                                                         // dense again: W + scale B A
    NoGradGuard no_grad;
    CHECK_CLOSE(fc.forward(x), y.detach(), tol_for(kFloat32));
}
