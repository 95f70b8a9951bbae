// hook_phases_test.cpp: the ZeRO seed scenario (docs/autograd.md §5). With reentrant
// checkpointing, post-accumulate-grad hooks fire in phases (one per nested graph task); an
// epilogue queued on the outermost task runs once after all of them; a backward called inside a
// forward (a tiled loss) is told apart from the user's backward.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
using autograd::CallbackScope;

namespace {

struct TwoLinear {
    Tensor w1, b1, w2, b2;
    TwoLinear() {
        manual_seed(42);
        w1 = randn({5, 4}, TensorOptions(kFloat64).requires_grad(true));
        b1 = randn({5}, TensorOptions(kFloat64).requires_grad(true));
        w2 = randn({3, 5}, TensorOptions(kFloat64).requires_grad(true));
        b2 = randn({3}, TensorOptions(kFloat64).requires_grad(true));
    }
    std::vector<std::pair<std::string, Tensor>> named() { return {{"w1", w1}, {"b1", b1}, {"w2", w2}, {"b2", b2}}; }
    // checkpoint_first: linear1 is checkpointed (the model); else linear2 is.
    Tensor loss(const Tensor& x, bool use_checkpoint, bool checkpoint_first = true) {
        auto layer1 = [&](const tensor_list& in) { return tensor_list{linear(in[0], w1, b1).tanh()}; };
        auto layer2 = [&](const tensor_list& in) { return tensor_list{linear(in[0], w2, b2)}; };
        CheckpointOptions reentrant{.use_reentrant = true};
        Tensor h = use_checkpoint && checkpoint_first ? checkpoint(layer1, {x}, reentrant)[0] : layer1({x})[0];
        Tensor y = use_checkpoint && !checkpoint_first ? checkpoint(layer2, {h}, reentrant)[0] : layer2({h})[0];
        return (y * y).mean();
    }
    void zero_grad() {
        for (auto& [n, p] : named()) p.set_grad(Tensor());
    }
};

// What ZeRO's BackwardHookStateManager needs from the engine: hook events with their task,
// one epilogue queued once per backward, and backwards-inside-forward filtered out.
struct PhaseRecorder {
    CallbackScope scope = CallbackScope::kOutermost;
    std::vector<std::string> events;
    std::vector<int64_t> task_ids;
    std::vector<std::string> ignored;
    bool queued = false;
    int epilogues = 0;
    std::vector<autograd::ScopedHook> handles;

    void attach(TwoLinear& m) {
        for (auto& [name, p] : m.named())
            handles.emplace_back(p.register_post_accumulate_grad_hook([this, name = name](Tensor&) { on_hook(name); }));
    }
    void on_hook(const std::string& name) {
        if (autograd::backward_called_from_forward()) {
            ignored.push_back(name);
            return;
        }
        events.push_back(name);
        task_ids.push_back(autograd::current_graph_task_id());
        if (!queued) {
            queued = true;
            autograd::queue_callback([this] {
                events.push_back("epilogue");
                ++epilogues;
                queued = false;
            },
                                     scope);
        }
    }
};

bool same_set(std::vector<std::string> a, std::vector<std::string> b) {
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    return a == b;
}

}  // namespace

TEST_CASE("reentrant checkpointing: two hook phases, one outermost epilogue, plain gradients") {
    TwoLinear m;
    manual_seed(1);
    Tensor x = randn({6, 4}, TensorOptions(kFloat64).requires_grad(true));
    m.loss(x, false).backward();
    std::vector<Tensor> expected;
    for (auto& [n, p] : m.named()) expected.push_back(p.grad().clone());
    m.zero_grad();

    PhaseRecorder rec;
    rec.attach(m);
    m.loss(x, true).backward();
    REQUIRE(rec.events.size() == 5);
    // phase 1 (outer task): linear2's parameters; phase 2 (nested task, after the recompute): linear1's.
    CHECK(same_set({rec.events[0], rec.events[1]}, {"w2", "b2"}));
    CHECK(same_set({rec.events[2], rec.events[3]}, {"w1", "b1"}));
    CHECK(rec.events[4] == "epilogue");
    CHECK(rec.epilogues == 1);
    CHECK(rec.task_ids[0] == rec.task_ids[1]);
    CHECK(rec.task_ids[2] == rec.task_ids[3]);
    CHECK(rec.task_ids[2] != rec.task_ids[0]);
    size_t i = 0;
    for (auto& [n, p] : m.named()) {
        CAPTURE(n);
        CHECK_CLOSE(p.grad(), expected[i++], tol_for(kFloat64));
    }
    // A second iteration behaves the same (the epilogue re-arms).
    rec.events.clear();
    m.loss(x, true).backward();
    CHECK(rec.epilogues == 2);
    CHECK(rec.events.back() == "epilogue");
}

TEST_CASE("outermost vs current scope when the first hook fires inside the nested task") {
    TwoLinear m;
    manual_seed(2);
    Tensor x = randn({6, 4}, TensorOptions(kFloat64).requires_grad(true));
    for (CallbackScope scope : {CallbackScope::kOutermost, CallbackScope::kCurrent}) {
        PhaseRecorder rec;
        rec.scope = scope;
        rec.attach(m);
        m.loss(x, true, /*checkpoint_first=*/false).backward();   // linear2 checkpointed: its hooks come first
        REQUIRE(rec.events.size() >= 5);
        CHECK(same_set({rec.events[0], rec.events[1]}, {"w2", "b2"}));
        if (scope == CallbackScope::kOutermost) {
            CHECK(rec.events.back() == "epilogue");
            CHECK(rec.epilogues == 1);
        } else {
            // PyTorch's behaviour (#24965): the epilogue runs when the nested task ends, too early.
            CHECK(rec.events[2] == "epilogue");
        }
    }
}

namespace {
// A tiled loss in the style of DeepSpeed's TiledFusedLogitsLoss: forward computes the weight's
// gradient tile by tile with backward() and keeps the input's gradient for its own backward.
struct TiledLoss : autograd::Function<TiledLoss> {
    static Tensor forward(autograd::AutogradContext* ctx, const Tensor& h, const Tensor& w) {
        Tensor total = zeros({}, kFloat64);
        tensor_list dh_tiles;
        for (int64_t start = 0; start < h.size(0); start += 2) {
            Tensor tile = h.narrow(0, start, 2).detach().requires_grad_(true);
            Tensor part;
            {
                EnableGradGuard grad_on;
                part = matmul(tile, w.t()).pow(2.0).sum();
                autograd::backward({part});          // accumulates into w.grad: not the user's backward
            }
            total = total + part.detach();
            dh_tiles.push_back(tile.grad());
        }
        ctx->save_for_backward({cat(dh_tiles, 0)});
        return total;
    }
    static tensor_list backward(autograd::AutogradContext* ctx, tensor_list grads) {
        return {ctx->get_saved_variables()[0] * grads[0], Tensor()};
    }
};
}  // namespace

TEST_CASE("a backward called inside a forward does not count as the user's backward") {
    TwoLinear m;
    manual_seed(3);
    Tensor x = randn({4, 4}, TensorOptions(kFloat64).requires_grad(true));
    PhaseRecorder rec;
    rec.attach(m);
    Tensor h = linear(x, m.w1, m.b1).tanh();
    Tensor loss = TiledLoss::apply(h, m.w2);
    CHECK(same_set(rec.ignored, {"w2", "w2"}));        // fired twice (two tiles), during forward
    CHECK(rec.events.empty());
    CHECK_FALSE(autograd::backward_called_from_forward());
    loss.backward();
    CHECK(same_set(std::vector<std::string>(rec.events.begin(), rec.events.end() - 1), {"w1", "b1"}));
    CHECK(rec.events.back() == "epilogue");
    CHECK(rec.epilogues == 1);
    // The gradients are those of the plain loss.
    Tensor w2_grad = m.w2.grad().clone(), w1_grad = m.w1.grad().clone();
    m.zero_grad();
    matmul(linear(x, m.w1, m.b1).tanh(), m.w2.t()).pow(2.0).sum().backward();
    CHECK_CLOSE(w2_grad, m.w2.grad(), tol_for(kFloat64));
    CHECK_CLOSE(w1_grad, m.w1.grad(), tol_for(kFloat64));
}

TEST_CASE("count_leaves_to_accumulate: the parameters each backward phase will produce, counted once per phase") {
    TwoLinear m;
    manual_seed(3);
    // x requires grad: reentrant checkpointing with no input that requires grad computes no gradient.
    Tensor x = randn({6, 4}, TensorOptions(kFloat64).requires_grad(true));
    std::vector<Tensor> leaves{m.w1, m.b1, m.w2, m.b2};
    CHECK(autograd::count_leaves_to_accumulate(leaves) == 0);             // outside backward
    SUBCASE("plain backward: every parameter in one phase") {
        std::vector<int64_t> counts;
        autograd::ScopedHook h = m.w2.register_post_accumulate_grad_hook(
            [&](Tensor&) { counts.push_back(autograd::count_leaves_to_accumulate(leaves)); });
        m.loss(x, false).backward();
        CHECK(counts == std::vector<int64_t>{4});
    }
    SUBCASE("reentrant checkpoint of linear1: the outer phase has w2, b2; the nested one w1, b1") {
        std::vector<int64_t> outer, nested;
        autograd::ScopedHook h2 = m.w2.register_post_accumulate_grad_hook(
            [&](Tensor&) { outer.push_back(autograd::count_leaves_to_accumulate(leaves)); });
        autograd::ScopedHook h1 = m.w1.register_post_accumulate_grad_hook(
            [&](Tensor&) { nested.push_back(autograd::count_leaves_to_accumulate(leaves)); });
        m.loss(x, true).backward();
        CHECK(outer == std::vector<int64_t>{2});
        CHECK(nested == std::vector<int64_t>{2});
    }
    SUBCASE("a parameter not used by this loss is not counted") {
        std::vector<int64_t> counts;
        autograd::ScopedHook h = m.w1.register_post_accumulate_grad_hook(
            [&](Tensor&) { counts.push_back(autograd::count_leaves_to_accumulate(leaves)); });
        (linear(x, m.w1, m.b1).tanh().sum()).backward();
        CHECK(counts == std::vector<int64_t>{2});
    }
}
