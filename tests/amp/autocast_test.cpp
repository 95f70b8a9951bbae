// autocast_test.cpp: AutocastGuard state and nesting, the policy table's five categories, backward
// under autocast, the cast cache (including PyTorch's no_grad and stale-cast bugs), the explainer,
// PyTorch reference values, and bad input.
#include <doctest/doctest.h>

#include <thread>

#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
Tensor leaf(const Shape& shape, DType dtype = kFloat32) {
    return randn(shape, TensorOptions(dtype)).requires_grad_(true);
}
}  // namespace

TEST_CASE("autocast: guard state is per device, nests, restores, and is thread-local") {
    CHECK_FALSE(amp::is_autocast_enabled(kCPU));
    CHECK(amp::default_autocast_dtype(kCPU) == kBFloat16);
    CHECK(amp::default_autocast_dtype(kCUDA) == kFloat16);
    {
        amp::AutocastGuard outer(kCPU);
        CHECK(amp::is_autocast_enabled(kCPU));
        CHECK_FALSE(amp::is_autocast_enabled(kCUDA));
        CHECK(amp::get_autocast_dtype(kCPU) == kBFloat16);
        CHECK(amp::autocast_active());
        {
            amp::AutocastGuard inner(kCPU, kFloat16);
            CHECK(amp::get_autocast_dtype(kCPU) == kFloat16);
            CHECK(amp::autocast_nesting() == 2);
            {
                amp::AutocastGuard off(kCPU, std::nullopt, /*enabled=*/false);
                CHECK_FALSE(amp::is_autocast_enabled(kCPU));
                CHECK_FALSE(amp::autocast_active());
                Tensor y = matmul(randn({2, 3}), randn({3, 2}));
                CHECK(y.dtype() == kFloat32);                       // disabled region: no cast
            }
            CHECK(amp::is_autocast_enabled(kCPU));
        }
        CHECK(amp::get_autocast_dtype(kCPU) == kBFloat16);
        bool other_thread_enabled = true;
        std::thread t([&] { other_thread_enabled = amp::is_autocast_enabled(kCPU); });
        t.join();
        CHECK_FALSE(other_thread_enabled);
    }
    CHECK_FALSE(amp::is_autocast_enabled(kCPU));
    CHECK(amp::autocast_nesting() == 0);
}

TEST_CASE("autocast: lower-precision ops run in the autocast dtype; f64, ints and other devices are kept") {
    manual_seed(1);
    Tensor a = randn({3, 4}), b = randn({4, 2}), w = randn({5, 4}), bias = randn({5});
    amp::AutocastGuard autocast(kCPU);
    CHECK(matmul(a, b).dtype() == kBFloat16);
    CHECK(mm(a, b).dtype() == kBFloat16);
    CHECK(bmm(a.unsqueeze(0), b.unsqueeze(0)).dtype() == kBFloat16);
    CHECK(linear(a, w, bias).dtype() == kBFloat16);
    CHECK(linear(a, w).dtype() == kBFloat16);                    // undefined bias is skipped
    CHECK(matmul(a.to(kFloat16), b).dtype() == kBFloat16);       // f16 is cast to the autocast dtype too
    CHECK(matmul(a.to(kFloat64), b.to(kFloat64)).dtype() == kFloat64);
    {
        amp::AutocastGuard f16(kCPU, kFloat16);
        CHECK(matmul(a, b).dtype() == kFloat16);
    }
    {
        amp::AutocastGuard cuda_only(kCUDA);                     // CPU tensors follow CPU's state only
        amp::AutocastGuard cpu_off(kCPU, std::nullopt, false);
        CHECK(matmul(a, b).dtype() == kFloat32);
    }
}

TEST_CASE("autocast: fp32 and fp32-output-dtype ops return f32; unlisted ops follow promotion") {
    manual_seed(2);
    Tensor x = randn({3, 5}).to(kBFloat16);
    amp::AutocastGuard autocast(kCPU);
    CHECK(F::layer_norm(x, {5}, randn({5}), randn({5})).dtype() == kFloat32);
    CHECK(logsumexp(x, 1).dtype() == kFloat32);
    CHECK(norm(x).dtype() == kFloat32);
    CHECK(F::softmax(x, -1).dtype() == kFloat32);
    CHECK(F::log_softmax(x, 0).dtype() == kFloat32);
    CHECK(sum(x).dtype() == kFloat32);
    CHECK(sum(x, {1}).dtype() == kFloat32);
    CHECK(sum(arange(4)).dtype() == kInt64);                    // integers are never cast
    CHECK((x + x).dtype() == kBFloat16);                         // not in the table
    CHECK((x + randn({3, 5})).dtype() == kFloat32);              // plain promotion
}

TEST_CASE("autocast: the promote policy casts to the widest eligible dtype; banned ops throw AmpError") {
    Tensor h = ones({2}, TensorOptions(kFloat16)), f = ones({2}), d = ones({2}, TensorOptions(kFloat64));
    amp::AutocastGuard autocast(kCPU);
    Tensor a = h, b = f, c = d;
    amp::autocast_inputs("cat", {&a, &b, &c});                   // f64 is ignored when finding the widest
    CHECK(a.dtype() == kFloat32);
    CHECK(b.dtype() == kFloat32);
    CHECK(c.dtype() == kFloat64);
    Tensor p = full({3}, 0.5), t = ones({3});
    CHECK_THROWS_WITH_AS(amp::autocast_inputs("binary_cross_entropy", {&p, &t}),
                         doctest::Contains("binary_cross_entropy_with_logits"), AmpError);
    CHECK_THROWS_WITH_AS(amp::autocast_inputs("binary_cross_entropy", {&p, &t}),
                         doctest::Contains("torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"), AmpError);
    CHECK_THROWS_WITH_AS(F::binary_cross_entropy(p, t), doctest::Contains("unsafe to autocast"), AmpError);
    CHECK(F::binary_cross_entropy_with_logits(p, t).dtype() == kFloat32);
    CHECK(F::mse_loss(p.to(kBFloat16), t).dtype() == kFloat32);
    CHECK(F::cross_entropy(randn({2, 3}).to(kBFloat16), arange(2)).dtype() == kFloat32);
    CHECK(exp(p.to(kBFloat16)).dtype() == kFloat32);
    CHECK(pow(p.to(kBFloat16), 2.0).dtype() == kFloat32);
    CHECK(F::scaled_dot_product_attention(randn({1, 1, 2, 4}), randn({1, 1, 2, 4}), randn({1, 1, 2, 4})).dtype() ==
          kBFloat16);
}

TEST_CASE("autocast: backward runs in the forward dtypes; f32 leaves get f32 grads close to f64") {
    manual_seed(3);
    Tensor x64 = randn({4, 6}, TensorOptions(kFloat64)), w64 = randn({5, 6}, TensorOptions(kFloat64));
    for (DType lower : {kBFloat16, kFloat16}) {
        CAPTURE(dtype_name(lower));
        Tensor x = x64.to(kFloat32).requires_grad_(true), w = w64.to(kFloat32).requires_grad_(true);
        Tensor y, loss;
        bool active_in_backward = true;
        {
            amp::AutocastGuard autocast(kCPU, lower);
            y = linear(x, w);                                                     // (4,5) lower
            CHECK(y.dtype() == lower);
            y.register_hook([&](const Tensor& g) {
                active_in_backward = amp::autocast_active();
                CHECK(g.dtype() == lower);                                        // grads in forward dtype
                return Tensor();
            });
            loss = F::softmax(y, -1).pow(2.0).sum();                              // () f32
            loss.backward();                                                      // inside the region
        }
        CHECK_FALSE(active_in_backward);
        CHECK(w.grad().dtype() == kFloat32);
        CHECK(x.grad().dtype() == kFloat32);
        Tensor x_ref = x64.clone().requires_grad_(true), w_ref = w64.clone().requires_grad_(true);
        Tensor y_ref = linear(x_ref, w_ref);
        F::softmax(y_ref, -1).pow(2.0).sum().backward();
        CHECK_CLOSE(y.to(kFloat32), y_ref.detach().to(kFloat32), tol_for(lower, 8));
        CHECK_CLOSE(w.grad(), w_ref.grad().to(kFloat32), tol_for(lower, 16));
        CHECK_CLOSE(x.grad(), x_ref.grad().to(kFloat32), tol_for(lower, 16));
    }
}

TEST_CASE("autocast: f64 is never cast, so f64 gradcheck passes inside an autocast region") {
    manual_seed(5);
    Tensor x = randn({3, 4}, TensorOptions(kFloat64).requires_grad(true));
    Tensor w = randn({2, 4}, TensorOptions(kFloat64).requires_grad(true));
    amp::AutocastGuard autocast(kCPU);
    CHECK(autograd::gradcheck(
        [](const tensor_list& in) { return tensor_list{F::softmax(linear(in[0], in[1]), -1).sum(std::vector<int64_t>{0})}; },
        {x, w}));
}

TEST_CASE("autocast: matches PyTorch (linear in bf16/f16, softmax to f32, grads f32)") {
    for (std::string name : {"amp_autocast_linear_softmax_bf16", "amp_autocast_linear_softmax_f16"}) {
        CAPTURE(name);
        Fixture fx = load_fixture(name);
        DType lower = fx.at("y").dtype();
        Tensor x = fx.at("x").clone().requires_grad_(true);
        Tensor w = fx.at("w").clone().requires_grad_(true);
        Tensor b = fx.at("b").clone().requires_grad_(true);
        Tensor y, s, loss;
        {
            amp::AutocastGuard autocast(kCPU, lower);
            y = linear(x, w, b);
            s = F::softmax(y, -1);
            loss = (s * fx.at("t")).sum();
        }
        loss.backward();
        CHECK(y.dtype() == lower);
        CHECK(s.dtype() == kFloat32);
        CHECK_CLOSE(y.to(kFloat32), fx.at("y").to(kFloat32), tol_for(lower));
        CHECK_CLOSE(s, fx.at("s"), tol_for(lower, 8));
        CHECK_CLOSE(w.grad(), fx.at("dw"), tol_for(lower, 16));
        CHECK_CLOSE(x.grad(), fx.at("dx"), tol_for(lower, 16));
        CHECK_CLOSE(b.grad(), fx.at("db"), tol_for(lower, 16));
    }
}

TEST_CASE("autocast cache: a weight used twice is cast once, and the cache clears when the outermost region exits") {
    Tensor w = leaf({4, 4}), x = randn({2, 4});
    {
        amp::AutocastGuard outer(kCPU);
        linear(x, w);
        {
            amp::AutocastGuard inner(kCPU);
            linear(x, w);
        }
        CHECK(amp::autocast_cache_stats().size == 1);            // an inner exit keeps it
        CHECK(amp::autocast_cache_stats().misses == 1);
        CHECK(amp::autocast_cache_stats().hits == 1);
        linear(x, randn({4, 4}));                                // a weight without grad: not cached
        linear(x * 2.0, w);                                      // x*2 is not a leaf: not cached
        CHECK(amp::autocast_cache_stats().size == 1);
        CHECK(amp::autocast_cache_stats().hits == 2);
    }
    CHECK(amp::autocast_cache_stats().size == 0);
}

TEST_CASE("autocast cache: a cast made under no_grad is not reused with grad on (pytorch #112583)") {
    Tensor w = leaf({3, 3}), x = randn({2, 3});
    amp::AutocastGuard autocast(kCPU);
    {
        NoGradGuard no_grad;
        linear(x, w);                                            // caches a cast without history
    }
    Tensor y = linear(x, w);                                     // PyTorch would reuse it: no grad for w
    CHECK(y.requires_grad());
    y.sum().backward();
    REQUIRE(w.grad().defined());
    CHECK(amp::autocast_cache_stats().misses == 2);
}

TEST_CASE("autocast cache: an in-place update of the weight invalidates its cached cast (stale cast)") {
    Tensor w = leaf({3, 3}), x = randn({2, 3});
    amp::AutocastGuard autocast(kCPU);
    Tensor before = linear(x, w);
    {
        NoGradGuard no_grad;
        w.add_(ones({3, 3}));                                    // an optimizer step inside the region
    }
    Tensor after = linear(x, w);
    Tensor fresh = linear(x.to(kBFloat16), w.detach().to(kBFloat16));
    CHECK(equal(after, fresh));
    CHECK_FALSE(equal(after, before));
    CHECK(amp::autocast_cache_stats().stale == 1);
}

TEST_CASE("autocast cache: a cached cast serves two forwards and two backwards (accumulation)") {
    Tensor w = leaf({3, 3}), x = randn({2, 3});
    amp::AutocastGuard autocast(kCPU);
    linear(x, w).sum().backward();
    Tensor first = w.grad().clone();
    linear(x, w).sum().backward();
    CHECK(amp::autocast_cache_stats().hits == 1);
    CHECK_CLOSE(w.grad(), first * 2.0, tol_for(kFloat32));
}

TEST_CASE("autocast: the recorder explains why each op ran in its dtype") {
    Tensor w = leaf({3, 4}), x = randn({2, 4});
    amp::AutocastRecorder rec;
    {
        amp::AutocastGuard autocast(kCPU);
        Tensor y = linear(x, w);
        linear(x, w);
        F::softmax(y, -1);
    }
    REQUIRE(rec.events().size() == 3);
    CHECK(rec.events()[0].op == "linear");
    CHECK(rec.events()[0].casts[0] == kBFloat16);
    CHECK(rec.events()[1].cache_hits[1]);
    std::string text = rec.str();
    CHECK(text.find("linear: policy lower_precision") != std::string::npos);
    CHECK(text.find("input 0: f32 cpu -> bf16") != std::string::npos);
    CHECK(text.find("cast taken from the cache") != std::string::npos);
    CHECK(text.find("softmax: policy fp32_output_dtype") != std::string::npos);
    std::array<amp::AutocastState, 2> off{};
    std::vector<amp::CastInput> ins{{true, kFloat64, kCPU}, {true, kInt64, kCPU}};
    CHECK(amp::explain("matmul", ins, off).find("autocast is off") != std::string::npos);
    CHECK(amp::explain("add", ins, off).find("not in the autocast table") != std::string::npos);
}

TEST_CASE("autocast: bad input gives typed errors") {
    CHECK_THROWS_WITH_AS(amp::AutocastGuard(kCPU, kFloat32), doctest::Contains("unsupported autocast dtype for cpu: f32"),
                         AmpError);
    CHECK_THROWS_AS(amp::AutocastGuard(kCPU, kInt64), AmpError);
    CHECK(amp::autocast_nesting() == 0);                         // a failed guard leaves no state
    CHECK_FALSE(amp::is_autocast_enabled(kCPU));
}

TEST_CASE("autocast: input_dtype rows cast nothing, and every op of issue 25 has its row") {
    for (const char* op : {"sin", "cos", "exp2", "erf", "sign", "floor", "ceil", "round", "trunc", "fmod", "remainder",
                           "lerp", "logical_and", "logical_or", "logical_xor", "apply_rotary_emb"}) {
        CAPTURE(op);
        const amp::PolicyEntry* entry = amp::find_policy(op);
        REQUIRE(entry != nullptr);
        CHECK(entry->policy == amp::CastPolicy::kInputDtype);
    }
    for (const char* op : {"expm1", "log1p", "rms_norm"}) CHECK(amp::find_policy(op)->policy == amp::CastPolicy::kFp32);
    CHECK(amp::find_policy("atan2")->policy == amp::CastPolicy::kPromote);
    AutocastStates on{};
    on[device_type_index(kCPU)] = AutocastState{true, kBFloat16};
    std::vector<amp::CastInput> ins{{true, kFloat32, kCPU}, {true, kBFloat16, kCPU}};
    for (const auto& cast : amp::decide_casts(amp::CastPolicy::kInputDtype, ins, on)) CHECK_FALSE(cast.has_value());
    CHECK(amp::explain("sin", ins, on).find("policy input_dtype") != std::string::npos);
    CHECK(amp::explain("sin", ins, on).find("runs in its inputs' dtype") != std::string::npos);
    CHECK(amp::policy_table_text().find("input_dtype:") != std::string::npos);
}

TEST_CASE("autocast: the reordering and sorting ops keep the input dtype; cumsum runs and returns f32") {
    for (const char* op : {"repeat", "flip", "roll", "sort"}) {
        CAPTURE(op);
        const amp::PolicyEntry* entry = amp::find_policy(op);
        REQUIRE(entry != nullptr);
        CHECK(entry->policy == amp::CastPolicy::kInputDtype);
    }
    CHECK(amp::find_policy("cumsum")->policy == amp::CastPolicy::kFp32OutputDtype);
    amp::AutocastGuard guard(kCPU, kBFloat16);
    Tensor x = randn({3, 4}).to(kBFloat16);
    CHECK(flip(x, {0}).dtype() == kBFloat16);
    CHECK(roll(x, {1}).dtype() == kBFloat16);
    CHECK(x.repeat({2, 1}).dtype() == kBFloat16);
    CHECK(sort(x).first.dtype() == kBFloat16);
    CHECK(topk(x, 2).first.dtype() == kBFloat16);
    CHECK(cumsum(x, 1).dtype() == kFloat32);
    CHECK(cumsum(randn({3, 4}), 1).dtype() == kFloat32);
}

TEST_CASE("autocast: the index ops' rows (scatter_add promotes, as PyTorch's list; the rest keep dtypes)") {
    CHECK(amp::find_policy("scatter_add")->policy == amp::CastPolicy::kPromote);
    for (const char* op : {"index_add", "take_along_dim", "repeat_interleave"})
        CHECK(amp::find_policy(op)->policy == amp::CastPolicy::kInputDtype);
    amp::AutocastGuard autocast(kCPU);
    Tensor index = zeros({2, 1}, TensorOptions(kInt64));
    Tensor mixed = scatter_add(ones({2, 3}, TensorOptions(kBFloat16)), 1, index, ones({2, 1}));
    CHECK(mixed.dtype() == kFloat32);                            // bf16 x meets f32 src in f32
    CHECK(gather(ones({2, 3}, TensorOptions(kBFloat16)), 1, index).dtype() == kBFloat16);
    CHECK(take_along_dim(ones({2, 3}), index, 1).dtype() == kFloat32);
    CHECK_THROWS_AS(index_add(ones({2, 3}, TensorOptions(kBFloat16)), 1, zeros({1}, TensorOptions(kInt64)),
                            ones({2, 1})), DTypeError);                                  // as PyTorch: no promotion
}
