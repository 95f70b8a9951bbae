// anomaly_mode.hpp: debugging aid. While enabled, every node records where in the forward it was
// created (a demangled stack trace), and the engine checks each backward's results: the first
// NaN/inf names the node's op and that creation trace.
#pragma once
#include <string>

#include "autograd/node.hpp"

namespace ampgrad::autograd {

bool anomaly_mode_enabled();
void set_anomaly_mode_enabled(bool enabled);

class AnomalyModeGuard {
public:
    explicit AnomalyModeGuard(bool enabled = true) : previous_(anomaly_mode_enabled()) {
        set_anomaly_mode_enabled(enabled);
    }
    ~AnomalyModeGuard() { set_anomaly_mode_enabled(previous_); }
    AnomalyModeGuard(const AnomalyModeGuard&) = delete;
    AnomalyModeGuard& operator=(const AnomalyModeGuard&) = delete;

private:
    bool previous_;
};

// The current call stack, demangled, innermost first, skipping ampgrad's own frames.
std::string capture_creation_trace();
// Throws AutogradError if any of `grads` holds a NaN or inf, naming node and its creation trace.
void check_anomaly(const Node& node, const tensor_list& grads);

}  // namespace ampgrad::autograd
