// grad_mode.hpp: the thread-local switch that decides whether ops record the graph.
// Inside backward it equals create_graph, as in PyTorch's engine (docs/autograd.md §2).
#pragma once

namespace ampgrad {

struct GradMode {
    static bool is_enabled();
    static void set_enabled(bool enabled);
};

// RAII: sets grad mode for a scope and restores the previous value.
class AutoGradMode {
public:
    explicit AutoGradMode(bool enabled) : previous_(GradMode::is_enabled()) { GradMode::set_enabled(enabled); }
    ~AutoGradMode() { GradMode::set_enabled(previous_); }
    AutoGradMode(const AutoGradMode&) = delete;
    AutoGradMode& operator=(const AutoGradMode&) = delete;

private:
    bool previous_;
};

struct NoGradGuard : AutoGradMode { NoGradGuard() : AutoGradMode(false) {} };
struct EnableGradGuard : AutoGradMode { EnableGradGuard() : AutoGradMode(true) {} };
// c10::InferenceMode's spelling: here it is no-grad mode (no graph is recorded); tensors made in it
// are ordinary tensors.
struct InferenceMode : AutoGradMode { explicit InferenceMode(bool enabled = true) : AutoGradMode(!enabled) {} };

// libtorch also spells these under torch::autograd::.
namespace autograd {
using ampgrad::AutoGradMode;
using ampgrad::GradMode;
using ampgrad::NoGradGuard;
}  // namespace autograd

}  // namespace ampgrad
