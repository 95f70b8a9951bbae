// reentrant_test.cpp: backward()/grad() called from inside a node, a hook or a custom Function
// (docs/autograd.md §4): nested ids, the parent's id restored, 100-deep nesting.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
using autograd::AutogradContext;

namespace {
Tensor leaf(std::vector<double> v) {
    Tensor t = tensor<double>(v);
    t.requires_grad_(true);
    return t;
}

// Backward computes its gradient with a nested grad() over a small graph: d(x^3)/dx = 3x^2.
struct CubeViaNestedGrad : autograd::Function<CubeViaNestedGrad> {
    static Tensor forward(AutogradContext* ctx, const Tensor& x) {
        ctx->save_for_backward({x});
        return x * x * x;
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
        int64_t before = autograd::current_graph_task_id();
        Tensor d;
        {
            EnableGradGuard grad_on;
            d = autograd::grad({(x * x * x).sum()}, {x})[0];
        }
        CHECK(autograd::current_graph_task_id() == before);
        return {grads[0] * d};
    }
};

// Recurses `depth` levels: each level's backward calls backward on a fresh graph of the next.
struct Nest : autograd::Function<Nest> {
    static Tensor forward(AutogradContext* ctx, const Tensor& x, int depth) {
        ctx->saved_data["depth"] = depth;
        return x * 1.0;
    }
    static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
        int depth = static_cast<int>(ctx->saved_data["depth"].toInt());
        max_depth_seen = std::max(max_depth_seen, autograd::current_graph_task_depth());
        if (depth > 0) {
            int64_t mine = autograd::current_graph_task_id();
            Tensor y = leaf({1.0});
            {
                EnableGradGuard grad_on;
                Nest::apply(y, depth - 1).sum().backward();
            }
            CHECK(y.grad().item<double>() == 1.0);
            CHECK(autograd::current_graph_task_id() == mine);
        }
        return {grads[0], Tensor()};
    }
    static inline int max_depth_seen = 0;
};
}  // namespace

TEST_CASE("grad() inside a custom Function's backward: nested id, parent id restored") {
    Tensor x = leaf({1, 2, 3});
    CubeViaNestedGrad::apply(x).sum().backward();
    CHECK_CLOSE(x.grad(), tensor<double>({3, 12, 27}), tol_for(kFloat64));
}

TEST_CASE("backward() inside a tensor hook runs a nested task with a new id") {
    Tensor x = leaf({1, 2}), z = leaf({4});
    int64_t outer = -1, inner = -1, after = -1;
    Tensor h = x * 2.0;
    h.register_hook([&](const Tensor& g) {
        outer = autograd::current_graph_task_id();
        EnableGradGuard grad_on;                      // hooks run under no-grad
        Tensor y = z * 5.0;
        y.grad_fn()->register_prehook([&](const tensor_list&) {
            inner = autograd::current_graph_task_id();
            CHECK(autograd::current_graph_task_depth() == 2);
            return tensor_list{};
        });
        y.sum().backward();
        after = autograd::current_graph_task_id();
        return g;
    });
    h.sum().backward();
    CHECK(outer >= 0);
    CHECK(inner > outer);
    CHECK(after == outer);
    CHECK_CLOSE(z.grad(), tensor<double>({5}), tol_for(kFloat64));
    CHECK_CLOSE(x.grad(), tensor<double>({2, 2}), tol_for(kFloat64));
    CHECK(autograd::current_graph_task_id() == -1);
}

TEST_CASE("nesting 100 deep completes (no stack overflow, no deadlock)") {
    Nest::max_depth_seen = 0;
    Tensor x = leaf({1.0});
    Nest::apply(x, 100).sum().backward();
    CHECK(Nest::max_depth_seen == 101);
    CHECK(x.grad().item<double>() == 1.0);
}

TEST_CASE("runaway reentrancy is a clear error, not a stack overflow") {
    Tensor x = leaf({1.0});
    CHECK_THROWS_WITH_AS(Nest::apply(x, 1000).sum().backward(), doctest::Contains("reentrant backward nested"),
                         AutogradError);
    CHECK(autograd::current_graph_task_id() == -1);
}

TEST_CASE("an exception in a nested task propagates and restores the outer state") {
    Tensor x = leaf({1}), z = leaf({1});
    Tensor h = x * 1.0;
    int64_t outer = -1;
    bool caught = false;
    h.register_hook([&](const Tensor& g) {
        outer = autograd::current_graph_task_id();
        EnableGradGuard grad_on;
        Tensor y = z * 1.0;
        y.register_hook([](const Tensor&) -> Tensor { throw ValueError("inner failure"); });
        try {
            y.sum().backward();
        } catch (const ValueError&) {
            caught = true;
        }
        CHECK(autograd::current_graph_task_id() == outer);
        return g;
    });
    h.sum().backward();
    CHECK(caught);
    CHECK_CLOSE(x.grad(), tensor<double>({1}), tol_for(kFloat64));
}
