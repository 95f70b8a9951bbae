// hooks_test.cpp: every hook kind (docs/autograd.md §3): tensor hooks, retain_grad, node pre- and
// post-hooks, post-accumulate-grad hooks, saved-tensor pack/unpack hooks; the order per node;
// bad return values; handles, deduplication and bounded hook lists.
#include <doctest/doctest.h>

#include "autograd/autograd_meta.hpp"
#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
Tensor leaf(std::vector<double> v) {
    Tensor t = tensor<double>(v);
    t.requires_grad_(true);
    return t;
}
}  // namespace

TEST_CASE("tensor hooks see and may replace the gradient, in registration order") {
    Tensor x = leaf({1, 2});
    Tensor h = x * 3.0;
    std::vector<double> seen;
    h.register_hook([&](const Tensor& g) {
        seen.push_back(g.to_vector<double>()[0]);
        return g * 2.0;
    });
    h.register_hook([&](const Tensor& g) {
        seen.push_back(g.to_vector<double>()[0]);     // sees the doubled gradient
        return Tensor();                              // undefined: keep it
    });
    h.sum().backward();
    CHECK(seen == std::vector<double>{1.0, 2.0});
    CHECK_CLOSE(x.grad(), tensor<double>({6, 6}), tol_for(kFloat64));
}

TEST_CASE("leaf hooks run before accumulation and change what lands in .grad") {
    Tensor x = leaf({1, 2});
    x.register_hook([](const Tensor& g) { return g * 10.0; });
    (x * 2.0).sum().backward();
    CHECK_CLOSE(x.grad(), tensor<double>({20, 20}), tol_for(kFloat64));
}

TEST_CASE("order per node: tensor hooks -> retains_grad -> pre-hooks -> apply -> post-hooks") {
    Tensor x = leaf({1, 2});
    Tensor h = x * 3.0;
    std::vector<std::string> events;
    h.retain_grad();
    h.grad_fn()->register_hook([&](const tensor_list& gi, const tensor_list& go) {
        events.push_back(fmt::format("post gi={} go={}", gi[0].to_vector<double>()[0], go[0].to_vector<double>()[0]));
        return tensor_list{};
    });
    h.grad_fn()->register_prehook([&](const tensor_list& go) {
        events.push_back(fmt::format("pre {} retained={}", go[0].to_vector<double>()[0], h.grad().defined()));
        return tensor_list{go[0] + 1.0};
    });
    h.register_hook([&](const Tensor& g) {
        events.push_back(fmt::format("tensor {} retained={}", g.to_vector<double>()[0], h.grad().defined()));
        return g * 2.0;
    });
    h.sum().backward();
    REQUIRE(events.size() == 3);
    CHECK(events[0] == "tensor 1 retained=false");
    CHECK(events[1] == "pre 2 retained=true");       // retains_grad ran between them
    CHECK(events[2] == "post gi=9 go=3");            // apply saw the pre-hook's value: (2+1)*3
    CHECK_CLOSE(h.grad(), tensor<double>({2, 2}), tol_for(kFloat64));   // after tensor hooks, before pre-hooks
    CHECK_CLOSE(x.grad(), tensor<double>({9, 9}), tol_for(kFloat64));
}

TEST_CASE("post-hooks may replace a node's results; pre-hooks only fire if the node runs") {
    Tensor x = leaf({1, 2});
    Tensor h = x.exp();
    Tensor y = (h * 2.0).sum();
    h.grad_fn()->register_hook([](const tensor_list& gi, const tensor_list&) { return tensor_list{gi[0] * 0.0}; });
    bool pre_fired = false;
    h.grad_fn()->register_prehook([&](const tensor_list&) {
        pre_fired = true;
        return tensor_list{};
    });
    autograd::grad({y}, {h}, {}, true);                // h's node does not run in grad() mode
    CHECK_FALSE(pre_fired);
    y.backward();
    CHECK(pre_fired);
    CHECK_CLOSE(x.grad(), zeros({2}, kFloat64), tol_for(kFloat64));
}

TEST_CASE("retain_grad: non-leaf keeps .grad; leaf is a no-op; requires grad") {
    Tensor x = leaf({1, 2});
    Tensor h = x * x;
    h.retain_grad();
    CHECK(h.retains_grad());
    (h * 3.0).sum().backward();
    CHECK_CLOSE(h.grad(), tensor<double>({3, 3}), tol_for(kFloat64));
    x.retain_grad();
    CHECK_THROWS_WITH_AS(tensor<double>({1}).retain_grad(), doctest::Contains("can't retain_grad on Tensor"),
                         AutogradError);
}

TEST_CASE("an in-place op moves retain_grad to the new node; an earlier hook keeps the old value's gradient") {
    Tensor x = leaf({1, 2});
    Tensor h = x * 1.0;
    h.retain_grad();
    Tensor before;
    h.register_hook([&](const Tensor& g) {
        before = g.clone();
        return Tensor();
    });
    h.mul_(tensor<double>({4, 5}));
    (h * 3.0).sum().backward();
    CHECK_CLOSE(h.grad(), tensor<double>({3, 3}), tol_for(kFloat64));          // gradient of the new value
    CHECK_CLOSE(before, tensor<double>({12, 15}), tol_for(kFloat64));          // of the value before mul_
}

TEST_CASE("post-accumulate-grad hooks run after .grad is updated, on leaves only") {
    Tensor p = leaf({1, 2});
    std::vector<double> seen;
    p.register_post_accumulate_grad_hook([&](Tensor& param) {
        seen.push_back(param.grad().to_vector<double>()[0]);
        NoGradGuard no_grad;
        param.mutable_grad().mul_(0.5);               // may change things in place
    });
    (p * 4.0).sum().backward();
    (p * 4.0).sum().backward();
    CHECK(seen == std::vector<double>{4.0, 6.0});
    CHECK_CLOSE(p.grad(), tensor<double>({3, 3}), tol_for(kFloat64));
    Tensor h = p * 2.0;
    CHECK_THROWS_WITH_AS(h.register_post_accumulate_grad_hook([](Tensor&) {}),
                         doctest::Contains("cannot be registered on non-leaf tensors"), AutogradError);
    CHECK_THROWS_WITH_AS(tensor<double>({1}).register_hook([](const Tensor& g) { return g; }),
                         doctest::Contains("cannot register a hook on a tensor that doesn't require gradient"),
                         AutogradError);
}

TEST_CASE("bad hook results are errors naming the hook") {
    Tensor x = leaf({1, 2});
    SUBCASE("size") {
        Tensor h = x * 2.0;
        autograd::register_hook(h, "my_scale", [](const Tensor&) { return zeros({3}, kFloat64); });
        CHECK_THROWS_WITH_AS(h.sum().backward(), doctest::Contains("hook 'my_scale' has changed the size of value"),
                             AutogradError);
    }
    SUBCASE("dtype") {
        Tensor h = x * 2.0;
        h.register_hook([](const Tensor& g) { return g.to(kFloat32); });
        CHECK_THROWS_WITH_AS(h.sum().backward(), doctest::Contains("has changed the type of value (was f64 got f32)"),
                             AutogradError);
    }
    SUBCASE("unnamed hooks are named by id, node and slot") {
        Tensor h = x * 2.0;
        h.register_hook([](const Tensor&) { return zeros({1}, kFloat64); });
        CHECK_THROWS_WITH_AS(h.sum().backward(), doctest::Contains("hook 'tensor hook #0 on MulBackward0 output 0'"),
                             AutogradError);
    }
    SUBCASE("pre-hook count") {
        Tensor h = x * 2.0;
        h.grad_fn()->register_prehook([](const tensor_list& g) { return tensor_list{g[0], g[0]}; }, "twice");
        CHECK_THROWS_WITH_AS(h.sum().backward(),
                             doctest::Contains("hook 'twice' has returned an incorrect number of values (got 2, but "
                                               "expected 1)"),
                             AutogradError);
    }
}

TEST_CASE("remove() unregisters; hook lists stay bounded under register/remove loops") {
    Tensor p = leaf({1, 2});
    int calls = 0;
    auto handle = p.register_post_accumulate_grad_hook([&](Tensor&) { ++calls; });
    (p * 1.0).sum().backward();
    handle.remove();
    handle.remove();                                  // twice is fine
    (p * 1.0).sum().backward();
    CHECK(calls == 1);
    for (int i = 0; i < 10000; ++i) {
        auto h1 = p.register_hook([](const Tensor& g) { return g; });
        auto h2 = p.register_post_accumulate_grad_hook([](Tensor&) {});
        h1.remove();
        h2.remove();
    }
    const auto* m = autograd::maybe_meta(p);
    CHECK(m->leaf_hooks->size() == 0);
    CHECK(m->post_accumulate_hooks->size() == 0);
    // Node hooks too, and a handle that outlives its node is harmless.
    Tensor h = p * 2.0;
    autograd::RemovableHandle late;
    for (int i = 0; i < 1000; ++i) {
        late = h.grad_fn()->register_prehook([](const tensor_list&) { return tensor_list{}; });
        late.remove();
    }
    CHECK(h.grad_fn()->num_hooks() == 0);
    late = h.grad_fn()->register_hook([](const tensor_list&, const tensor_list&) { return tensor_list{}; });
    h = Tensor();
    late.remove();
}

TEST_CASE("keyed registration replaces the earlier hook instead of adding one") {
    Tensor p = leaf({1, 2});
    int which = 0;
    for (int step = 1; step <= 100; ++step)
        autograd::register_post_accumulate_grad_hook(p, "zero_epilogue", [&which, step](Tensor&) { which = step; });
    CHECK(autograd::maybe_meta(p)->post_accumulate_hooks->size() == 1);
    (p * 1.0).sum().backward();
    CHECK(which == 100);
    for (int i = 0; i < 50; ++i) autograd::register_hook(p, "scale", [](const Tensor& g) { return g * 3.0; });
    CHECK(autograd::maybe_meta(p)->leaf_hooks->size() == 1);
}

TEST_CASE("ScopedHook removes its hook when it goes out of scope") {
    Tensor p = leaf({1});
    int calls = 0;
    {
        autograd::ScopedHook scoped = p.register_post_accumulate_grad_hook([&](Tensor&) { ++calls; });
        (p * 1.0).sum().backward();
    }
    (p * 1.0).sum().backward();
    CHECK(calls == 1);
    autograd::ScopedHook kept = p.register_post_accumulate_grad_hook([&](Tensor&) { ++calls; });
    autograd::RemovableHandle released = kept.release();   // now it outlives `kept`
    CHECK(released.active());
}

TEST_CASE("saved-tensor pack/unpack hooks see every saved tensor; results are checked") {
    Tensor x = leaf({1, 2, 3});
    int packed = 0, unpacked = 0;
    Tensor y;
    {
        autograd::SavedTensorsHooksGuard hooks({[&](const Tensor& t) -> std::any {
                                                    ++packed;
                                                    return t.clone();          // e.g. an offloaded copy
                                                },
                                                [&](const std::any& a) {
                                                    ++unpacked;
                                                    return std::any_cast<Tensor>(a);
                                                }});
        y = (x.exp() * x).sum();
    }
    CHECK(packed >= 2);
    y.backward();
    CHECK(unpacked == packed);
    Tensor xd = x.detach();
    CHECK_CLOSE(x.grad(), xd.exp() * xd + xd.exp(), tol_for(kFloat64));
    // An unpack hook that returns the wrong shape is reported.
    Tensor z;
    {
        autograd::SavedTensorsHooksGuard hooks({[](const Tensor& t) -> std::any { return t; },
                                                [](const std::any&) { return zeros({7}, kFloat64); }});
        z = (x * x).sum();
    }
    CHECK_THROWS_WITH_AS(z.backward(), doctest::Contains("saved tensor unpack hook"), AutogradError);
}

TEST_CASE("a pack hook that modifies its input in place is an error") {
    Tensor x = leaf({1, 2});
    Tensor h = x * 1.0;
    autograd::SavedTensorsHooksGuard hooks({[](const Tensor& t) -> std::any {
                                                Tensor alias = t;
                                                NoGradGuard no_grad;
                                                alias.mul_(2.0);
                                                return t;
                                            },
                                            [](const std::any& a) { return std::any_cast<Tensor>(a); }});
    CHECK_THROWS_WITH_AS(h * h, doctest::Contains("A saved tensor pack hook is modifying its input in place"),
                         AutogradError);
}

TEST_CASE("hooks run under no-grad unless create_graph") {
    Tensor x = leaf({1, 2});
    bool grad_mode_in_hook = true;
    Tensor h = x * 2.0;
    h.register_hook([&](const Tensor&) {
        grad_mode_in_hook = GradMode::is_enabled();
        return Tensor();
    });
    h.sum().backward(Tensor(), true);
    CHECK_FALSE(grad_mode_in_hook);
    h.sum().backward(Tensor(), true, true);
    CHECK(grad_mode_in_hook);
}

TEST_CASE("hooks that return nothing only look: tensor, node pre- and post-hooks (libtorch takes both kinds)") {
    Tensor x = tensor<double>({1, 2}, {2}).requires_grad_();
    Tensor h = x * 3.0;
    Tensor seen_tensor, seen_pre, seen_post;
    h.register_hook([&](const Tensor& g) { seen_tensor = g.clone(); });
    h.grad_fn()->register_prehook([&](const tensor_list& g) { seen_pre = g[0].clone(); });
    h.grad_fn()->register_hook([&](const tensor_list& gi, const tensor_list&) { seen_post = gi[0].clone(); });
    (h * 2.0).sum().backward();
    CHECK(seen_tensor.to_vector<double>() == std::vector<double>{2, 2});
    CHECK(seen_pre.to_vector<double>() == std::vector<double>{2, 2});
    CHECK(seen_post.to_vector<double>() == std::vector<double>{6, 6});
    CHECK(x.grad().to_vector<double>() == std::vector<double>{6, 6});   // nothing changed
}
