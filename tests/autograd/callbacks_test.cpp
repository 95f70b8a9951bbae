// callbacks_test.cpp: queue_callback (docs/autograd.md §5): error outside backward, once and
// FIFO after every node, callbacks queueing callbacks, current vs outermost task scope.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;
using autograd::CallbackScope;

namespace {
Tensor leaf(std::vector<double> v) {
    Tensor t = tensor<double>(v);
    t.requires_grad_(true);
    return t;
}
}  // namespace

TEST_CASE("queue_callback outside backward is a clear error") {
    CHECK_THROWS_WITH_AS(autograd::queue_callback([] {}),
                         doctest::Contains("Final callbacks can only be installed during backward pass"),
                         AutogradError);
}

TEST_CASE("callbacks run once, FIFO, after every node; a callback may queue more") {
    Tensor x = leaf({1, 2}), w = leaf({3});
    std::vector<std::string> events;
    bool queued = false;
    x.register_post_accumulate_grad_hook([&](Tensor&) { events.push_back("acc x"); });
    w.register_post_accumulate_grad_hook([&](Tensor&) { events.push_back("acc w"); });
    Tensor h = x * w;
    h.register_hook([&](const Tensor&) {
        events.push_back("hook h");
        if (!queued) {
            queued = true;
            autograd::queue_callback([&] {
                events.push_back("cb1");
                autograd::queue_callback([&] { events.push_back("cb3 (queued by cb1)"); });
            });
            autograd::queue_callback([&] { events.push_back("cb2"); });
        }
        return Tensor();
    });
    (h * h).sum().backward();
    REQUIRE(events.size() == 6);
    CHECK(events[0] == "hook h");
    CHECK(events[3] == "cb1");
    CHECK(events[4] == "cb2");
    CHECK(events[5] == "cb3 (queued by cb1)");
    CHECK(((events[1] == "acc x" && events[2] == "acc w") || (events[1] == "acc w" && events[2] == "acc x")));
    // A new backward does not rerun old callbacks.
    events.clear();
    (x * 1.0).sum().backward();
    CHECK(events == std::vector<std::string>{"acc x"});
}

TEST_CASE("callbacks run inside their task: the task id is still current") {
    Tensor x = leaf({1});
    int64_t in_hook = -2, in_callback = -2;
    x.register_post_accumulate_grad_hook([&](Tensor&) {
        in_hook = autograd::current_graph_task_id();
        autograd::queue_callback([&] { in_callback = autograd::current_graph_task_id(); });
    });
    (x * 2.0).sum().backward();
    CHECK(in_hook >= 0);
    CHECK(in_callback == in_hook);
}

TEST_CASE("scope: kCurrent fires when the nested task ends, kOutermost after the outer task") {
    Tensor x = leaf({1, 2}), z = leaf({5});
    std::vector<std::string> events;
    int64_t outer_id = -1, inner_id = -1;
    Tensor y = (x * 2.0).sum();
    // A hook of the outer task runs a nested backward; the nested task queues both kinds.
    y.grad_fn()->register_prehook([&](const tensor_list&) {
        outer_id = autograd::current_graph_task_id();
        z.register_post_accumulate_grad_hook([&](Tensor&) {
            inner_id = autograd::current_graph_task_id();
            CHECK(autograd::outermost_graph_task_id() == outer_id);
            autograd::queue_callback([&] { events.push_back("current"); }, CallbackScope::kCurrent);
            autograd::queue_callback([&] {
                events.push_back("outermost");
                CHECK(autograd::current_graph_task_id() == outer_id);
            },
                                     CallbackScope::kOutermost);
        });
        EnableGradGuard grad_on;                      // hooks run under no-grad: build the graph
        (z * 3.0).sum().backward();
        events.push_back("nested backward returned");
        return tensor_list{};
    });
    x.register_post_accumulate_grad_hook([&](Tensor&) { events.push_back("outer acc x"); });
    y.backward();
    CHECK(inner_id != outer_id);
    CHECK(events == std::vector<std::string>{"current", "nested backward returned", "outer acc x", "outermost"});
}

TEST_CASE("an exception in a node skips the callbacks of the task") {
    Tensor x = leaf({1});
    bool ran = false;
    Tensor h = x * 1.0;
    h.register_hook([&](const Tensor&) -> Tensor {
        autograd::queue_callback([&] { ran = true; });
        throw ValueError("stop");
    });
    CHECK_THROWS_AS(h.sum().backward(), ValueError);
    CHECK_FALSE(ran);
    (x * 1.0).sum().backward();                       // the failed task's callbacks are gone
    CHECK_FALSE(ran);
}
