// checkpoint_test.cpp: activation checkpointing, both variants (docs/autograd.md §7): same
// gradients as without it (and as PyTorch), RNG and registered-state replay, early stop, the
// determinism check, the double-unpack and reentrant-with-grad() errors, nesting, grad() and
// backward inside the region.
#include <doctest/doctest.h>

#include "amp/autocast.hpp"
#include "tests/support/check_close.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {

struct Params {
    Tensor w1, w2;
    explicit Params(uint64_t seed) {
        manual_seed(seed);
        w1 = randn({3, 4}, TensorOptions(kFloat64).requires_grad(true));
        w2 = randn({4, 3}, TensorOptions(kFloat64).requires_grad(true));
    }
    Tensor block(const Tensor& x) const { return matmul(matmul(x, w1).tanh(), w2); }
    CheckpointFn fn(int* calls = nullptr) const {
        return [this, calls](const tensor_list& in) {
            if (calls) ++*calls;
            return tensor_list{block(in[0])};
        };
    }
    void zero_grad() {
        w1.set_grad(Tensor());
        w2.set_grad(Tensor());
    }
};

tensor_list grads_of(const tensor_list& ts) {
    tensor_list g;
    for (const Tensor& t : ts) g.push_back(t.grad());
    return g;
}

}  // namespace

TEST_CASE("both variants give the gradients of the plain model") {
    Params p(1);
    manual_seed(2);
    Tensor x = randn({2, 3}, TensorOptions(kFloat64).requires_grad(true));
    p.block(p.block(x).exp()).sum().backward();
    tensor_list expected = grads_of({x, p.w1, p.w2});
    for (bool reentrant : {false, true}) {
        CAPTURE(reentrant);
        x.set_grad(Tensor());
        p.zero_grad();
        int calls = 0;
        Tensor h = checkpoint(p.fn(&calls), {x}, {.use_reentrant = reentrant})[0];
        Tensor loss = checkpoint(p.fn(&calls), {h.exp()}, {.use_reentrant = reentrant})[0].sum();
        CHECK(calls == 2);
        loss.backward();
        CHECK(calls == 4);                               // each region recomputed once
        tensor_list got = grads_of({x, p.w1, p.w2});
        for (size_t i = 0; i < got.size(); ++i) CHECK_CLOSE(got[i], expected[i], tol_for(kFloat64));
    }
}

TEST_CASE("checkpointed gradients match PyTorch (fixture autograd_checkpoint_mlp)") {
    Fixture fx = load_fixture("autograd_checkpoint_mlp");
    Tensor w1 = fx.at("w1").clone().requires_grad_(true), w2 = fx.at("w2").clone().requires_grad_(true);
    auto block = [&](const tensor_list& in) { return tensor_list{matmul(matmul(in[0], w1).tanh(), w2)}; };
    for (bool reentrant : {true, false}) {
        CAPTURE(reentrant);
        std::string tag = reentrant ? "reentrant" : "nonreentrant";
        Tensor x = fx.at("x").clone().requires_grad_(true);
        w1.set_grad(Tensor());
        w2.set_grad(Tensor());
        Tensor h = checkpoint(block, {x}, {.use_reentrant = reentrant})[0];
        checkpoint(block, {h.exp()}, {.use_reentrant = reentrant})[0].sum().backward();
        CHECK_CLOSE(x.grad(), fx.at("dx_" + tag), tol_for(kFloat32));
        CHECK_CLOSE(w1.grad(), fx.at("dw1_" + tag), tol_for(kFloat32));
        CHECK_CLOSE(w2.grad(), fx.at("dw2_" + tag), tol_for(kFloat32));
    }
}

TEST_CASE("the recompute replays the forward's random numbers (dropout inside the region)") {
    manual_seed(7);
    Tensor x = randn({64}, TensorOptions(kFloat64).requires_grad(true));
    auto fn = [](const tensor_list& in) { return tensor_list{F::dropout(in[0] * 3.0, 0.5, true)}; };
    for (bool reentrant : {false, true}) {
        CAPTURE(reentrant);
        x.set_grad(Tensor());
        manual_seed(123);
        Tensor y = checkpoint(fn, {x}, {.use_reentrant = reentrant})[0];
        Tensor kept = ne(y, zeros_like(y)).to(kFloat64).detach();       // the forward's mask
        (void)rand({1000});                                                // move the RNG on
        GeneratorState before = get_rng_state();
        y.sum().backward();
        CHECK_CLOSE(x.grad(), kept * 6.0, tol_for(kFloat64));             // 3 * 1/(1-p) where kept
        GeneratorState after = get_rng_state();
        CHECK(after.offset == before.offset);                              // the RNG is put back
    }
}

TEST_CASE("the recompute replays the forward's autocast state (backward runs outside autocast)") {
    manual_seed(8);
    Tensor x = randn({4, 3}, TensorOptions().requires_grad(true));
    Tensor w = randn({3, 5}, TensorOptions().requires_grad(true));
    std::vector<DType> seen;
    auto fn = [&](const tensor_list& in) {
        Tensor h = matmul(in[0], w);                    // bf16 under CPU autocast
        seen.push_back(h.dtype());
        return tensor_list{h.tanh()};
    };
    Tensor ref;
    {
        amp::AutocastGuard autocast(kCPU);
        ref = fn({x})[0];
    }
    ref.to(kFloat32).sum().backward();
    Tensor ref_dx = x.grad().clone(), ref_dw = w.grad().clone();
    for (bool reentrant : {false, true}) {
        CAPTURE(reentrant);
        x.set_grad(Tensor());
        w.set_grad(Tensor());
        seen.clear();
        Tensor y;
        {
            amp::AutocastGuard autocast(kCPU);
            y = checkpoint(fn, {x}, {.use_reentrant = reentrant})[0];
        }
        CHECK(y.dtype() == kBFloat16);
        y.to(kFloat32).sum().backward();
        CHECK(seen == std::vector<DType>{kBFloat16, kBFloat16});
        CHECK_FALSE(amp::is_autocast_enabled(kCPU));      // put back after the recompute
        CHECK_CLOSE(x.grad(), ref_dx, tol_for(kBFloat16));
        CHECK_CLOSE(w.grad(), ref_dw, tol_for(kBFloat16));
    }
}

TEST_CASE("non-reentrant: works with grad() and inputs=, recomputes per graph task") {
    Params p(3);
    Tensor x = randn({2, 3}, TensorOptions(kFloat64).requires_grad(true));
    Tensor expected = autograd::grad({p.block(x).pow(2.0).sum()}, {x})[0];
    int calls = 0;
    Tensor y = checkpoint(p.fn(&calls), {x})[0].pow(2.0).sum();
    Tensor g1 = autograd::grad({y}, {x}, {}, true)[0];
    Tensor g2 = autograd::grad({y}, {x}, {}, true)[0];   // a second task: recomputes again
    CHECK(calls == 3);
    CHECK_CLOSE(g1, expected, tol_for(kFloat64));
    CHECK_CLOSE(g2, expected, tol_for(kFloat64));
    y.backward(Tensor(), false, false, {p.w1});
    CHECK(p.w1.grad().defined());
    CHECK_FALSE(p.w2.grad().defined());
}

TEST_CASE("reentrant: grad() or inputs= is a clear error") {
    Params p(4);
    Tensor x = randn({2, 3}, TensorOptions(kFloat64).requires_grad(true));
    Tensor y = checkpoint(p.fn(), {x}, {.use_reentrant = true})[0].sum();
    CHECK_THROWS_WITH_AS(autograd::grad({y}, {x}, {}, true),
                         doctest::Contains("When use_reentrant=True, torch.utils.checkpoint is incompatible with .grad() "
                                           "or passing an `inputs` parameter to .backward()"),
                         AutogradError);
    CHECK_THROWS_WITH_AS(y.backward(Tensor(), true, false, {x}), doctest::Contains("use_reentrant=False"),
                         AutogradError);
}

TEST_CASE("non-reentrant early stop: the recompute ends once every saved tensor is back") {
    Tensor x = tensor<double>({1, 2}).requires_grad_(true);
    int after_last_save = 0;
    auto fn = [&](const tensor_list& in) {
        Tensor y = in[0].exp() * in[0];                 // saves: exp's result, then mul's two inputs
        Tensor detached_tail;
        {
            NoGradGuard no_grad;                        // nothing saved from here on
            detached_tail = y * 2.0;
        }
        ++after_last_save;
        return tensor_list{y};
    };
    Tensor y = checkpoint(fn, {x})[0];
    y.sum().backward(Tensor(), true);
    CHECK(after_last_save == 1);                         // the recompute stopped before this line
    Tensor z = checkpoint(fn, {x}, {.early_stop = false})[0];
    z.sum().backward();
    CHECK(after_last_save == 3);
}

TEST_CASE("non-reentrant determinism check: count and metadata") {
    Tensor x = tensor<double>({1, 2, 3}).requires_grad_(true);
    int call = 0;
    SUBCASE("fewer tensors saved on recompute") {
        auto fn = [&](const tensor_list& in) {
            Tensor y = ++call == 1 ? in[0].exp().exp() : in[0].exp() + 0.0;
            return tensor_list{y * 1.0};
        };
        Tensor y = checkpoint(fn, {x})[0];
        CHECK_THROWS_WITH_AS(y.sum().backward(),
                             doctest::Contains("torch.utils.checkpoint: A different number of tensors was saved during the original forward "
                                               "and recomputation"),
                             AutogradError);
    }
    SUBCASE("different metadata") {
        auto fn = [&](const tensor_list& in) {
            Tensor y = ++call == 1 ? in[0].exp() : in[0].narrow(0, 0, 2).exp();
            return tensor_list{y};
        };
        Tensor y = checkpoint(fn, {x})[0];
        CHECK_THROWS_WITH_AS(y.sum().backward(),
                             doctest::Contains("Recomputed values for the following tensors have different metadata"),
                             AutogradError);
    }
    SUBCASE("more tensors without early stop") {
        auto fn = [&](const tensor_list& in) {
            Tensor y = in[0].exp();
            if (++call > 1) y = y.exp();
            return tensor_list{y};
        };
        Tensor y = checkpoint(fn, {x}, {.early_stop = false})[0];
        CHECK_THROWS_WITH_AS(y.sum().backward(),
                             doctest::Contains("trying to save more tensors during recomputation than during the "
                                               "original forward pass"),
                             AutogradError);
    }
}

namespace {
// Unpacks its saved tensor twice in backward: not allowed under non-reentrant checkpointing.
struct UnpackTwice : autograd::Function<UnpackTwice> {
    static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
        ctx->save_for_backward({x});
        return x * 2.0;
    }
    static tensor_list backward(autograd::AutogradContext* ctx, tensor_list grads) {
        ctx->get_saved_variables();
        ctx->get_saved_variables();
        return {grads[0] * 2.0};
    }
};
}  // namespace

TEST_CASE("non-reentrant: unpacking a recomputed tensor twice is an error") {
    Tensor x = tensor<double>({1, 2}).requires_grad_(true);
    Tensor y = checkpoint([](const tensor_list& in) { return tensor_list{UnpackTwice::apply(in[0] * 1.0)}; }, {x})[0];
    CHECK_THROWS_WITH_AS(y.sum().backward(),
                         doctest::Contains("torch.utils.checkpoint: Unpack is being triggered for a tensor that was already unpacked once"),
                         AutogradError);
}

TEST_CASE("nested checkpoints give the plain gradients (both variants)") {
    Params p(5);
    Tensor x = randn({2, 3}, TensorOptions(kFloat64).requires_grad(true));
    p.block(p.block(x).tanh()).sum().backward();
    tensor_list expected = grads_of({x, p.w1, p.w2});
    for (bool reentrant : {false, true}) {
        CAPTURE(reentrant);
        x.set_grad(Tensor());
        p.zero_grad();
        CheckpointOptions opts{.use_reentrant = reentrant};
        auto outer = [&](const tensor_list& in) {
            Tensor inner = checkpoint(p.fn(), {in[0]}, opts)[0];
            return tensor_list{p.block(inner.tanh())};
        };
        checkpoint(outer, {x}, opts)[0].sum().backward();
        tensor_list got = grads_of({x, p.w1, p.w2});
        for (size_t i = 0; i < got.size(); ++i) CHECK_CLOSE(got[i], expected[i], tol_for(kFloat64));
    }
}

TEST_CASE("non-reentrant: a backward inside the checkpointed forward works") {
    Tensor x = tensor<double>({0.5, 1.5}).requires_grad_(true);
    auto fn = [](const tensor_list& in) {
        Tensor y = in[0] * in[0] * in[0];
        Tensor g = autograd::grad({y.sum()}, {in[0]}, {}, true, true)[0];    // 3x^2, differentiable
        return tensor_list{g * y};
    };
    Tensor out = checkpoint(fn, {x})[0];
    out.sum().backward();
    // d/dx (3x^2 * x^3) = 15 x^4
    CHECK_CLOSE(x.grad(), x.detach().pow(4.0) * 15.0, tol_for(kFloat64));
}

TEST_CASE("checkpoint is a pass-through without grad mode; retain_graph allows a second backward") {
    Params p(6);
    Tensor x = randn({2, 3}, kFloat64);
    int calls = 0;
    {
        NoGradGuard no_grad;
        Tensor y = checkpoint(p.fn(&calls), {x})[0];
        CHECK_FALSE(y.requires_grad());
    }
    Tensor y = checkpoint(p.fn(&calls), {x})[0].sum();
    y.backward(Tensor(), true);
    tensor_list first = grads_of({p.w1, p.w2});
    p.zero_grad();
    y.backward();
    CHECK(calls == 4);
    CHECK_CLOSE(p.w1.grad(), first[0], tol_for(kFloat64));
}

TEST_CASE("checkpointed nodes hold no saved bytes and are marked in graph dumps") {
    Params p(7);
    Tensor x = randn({2, 3}, TensorOptions(kFloat64).requires_grad(true));
    Tensor plain = p.block(x);
    Tensor ck = checkpoint(p.fn(), {x})[0];
    CHECK(plain.grad_fn()->saved_bytes() > 0);
    CHECK(ck.grad_fn()->checkpointed);
    CHECK(ck.grad_fn()->saved_bytes() == 0);
    CHECK_FALSE(plain.grad_fn()->checkpointed);
    Tensor re = checkpoint(p.fn(), {x}, {.use_reentrant = true})[0];
    CHECK(re.grad_fn()->name() == "CheckpointFunctionBackward");
    CHECK(re.grad_fn()->checkpointed);
}
