// anomaly_test.cpp: anomaly mode names the op whose backward produced NaN/inf and where in the
// forward its node was made; errors raised inside a node carry that place too.
#include <doctest/doctest.h>

#include "tests/support/check_close.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

namespace {
// A named forward step, so the creation trace has a frame we can look for.
__attribute__((noinline)) Tensor my_forward_step(const Tensor& x) { return x.sqrt(); }
}  // namespace

TEST_CASE("anomaly mode: NaN/inf from a backward names the op and its creation trace") {
    Tensor x = tensor<double>({0.0, 4.0}).requires_grad_(true);
    {
        autograd::AnomalyModeGuard anomaly;
        Tensor y = my_forward_step(x).sum();
        CHECK_FALSE(y.grad_fn()->creation_trace.empty());
        try {
            y.backward();
            FAIL("expected an AutogradError");
        } catch (const AutogradError& e) {
            std::string what = e.what();
            CHECK(what.find("Function 'SqrtBackward0' returned nan or inf values") != std::string::npos);
            CHECK(what.find("op 'sqrt'") != std::string::npos);
            CHECK(what.find("ampgrad::sqrt") != std::string::npos);      // the forward call that made the node
        }
    }
    CHECK_FALSE(autograd::anomaly_mode_enabled());
    // Without anomaly mode the inf simply flows into .grad.
    x.set_grad(Tensor());
    my_forward_step(x).sum().backward();
    CHECK(std::isinf(x.grad().to_vector<double>()[0]));
}

TEST_CASE("anomaly mode: an error inside a node names where that node was created") {
    Tensor x = tensor<double>({1.0, 2.0}).requires_grad_(true);
    autograd::AnomalyModeGuard anomaly;
    Tensor h = x * 1.0;
    Tensor y = (h * h).sum();
    {
        NoGradGuard no_grad;
        h.add_(1.0);                                  // mul saved h: now stale
    }
    CHECK_THROWS_WITH_AS(y.backward(), doctest::Contains("The forward call that created MulBackward0 (op 'mul')"),
                         AutogradError);
}

TEST_CASE("anomaly mode off: nodes keep no trace") {
    Tensor x = tensor<double>({1.0}).requires_grad_(true);
    Tensor y = x.exp();
    CHECK(y.grad_fn()->creation_trace.empty());
}
