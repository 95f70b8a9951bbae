// step_result.hpp: what an optimizer step under loss scaling did (stepped, or skipped and why), and
// where the first non-finite gradient was when it skipped.
//
// A result may be deferred. On a GPU, GradScaler::step issues the fused optimizer's kernel, which
// reads found_inf on the device and skips by itself; the host does not wait to learn which happened.
// The result then holds the device flag and reads it (one host sync) the first time it is asked:
//
//   amp::StepResult r = scaler.step(optimizer);       // no wait: the step is queued
//   scaler.update();                                   // no wait: the scale is updated on the device
//   if (step % 100 == 0 && r.skipped()) log(r.reason());   // the wait happens here, when logging
//
// Asked before update(), a skipped result also names the parameter whose gradient overflowed; after
// update() the gradients may have changed, so it says that it could not look.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace ampgrad::amp {

// Overflow provenance: where the first non-finite gradient was on a skipped step.
struct OverflowRecord {
    int64_t iteration = 0;               // the scaler's iteration (update() calls before it)
    std::string param;                   // the parameter's name (Tensor::name()) or its group position
    int64_t nonfinite_count = 0;         // how many elements of its gradient were inf/NaN
    double scale = 0.0;                  // the scale the backward used
};

namespace detail {

// One step's outcome, shared by its StepResult and the scaler (until the scaler has counted it).
struct StepOutcome {
    bool resolved = true;
    bool skipped = false;
    std::string reason;                  // empty when it stepped
    OverflowRecord record;               // meaningful when skipped
    // Until resolved: the summed found_inf (0-dim f32, non-zero on a skip) and the scale the step
    // used, both on the device; the optimizer's parameters by group, to locate the overflow.
    Tensor found_inf;
    Tensor scale;
    std::vector<std::vector<Tensor>> param_groups;

    void resolve();                      // HOST SYNC when still deferred
    void settle(bool step_skipped);      // resolve with a flag the caller has already read
    void forget_gradients();             // update() ran: the gradients may change from here on
    void locate_overflow();              // fills record.param and nonfinite_count
};

// A parameter's name for messages: its Tensor::name() (set by nn::Module) or its group position.
std::string param_label(const Tensor& p, size_t group, size_t index);

}  // namespace detail

class StepResult {
public:
    StepResult() = default;                                  // stepped
    static StepResult skipped_with(std::string reason);      // skipped, for the given reason
    explicit StepResult(std::shared_ptr<detail::StepOutcome> outcome) : outcome_(std::move(outcome)) {}

    bool ready() const;                  // known without reading the device
    bool skipped() const;                // the step changed nothing (HOST SYNC the first time, if deferred)
    bool found_inf() const { return skipped(); }   // some gradient held an inf or NaN
    // API.md's "step(optimizer) reports whether it skipped": bool skipped = scaler.step(opt);
    operator bool() const { return skipped(); }    // NOLINT(google-explicit-constructor): true = skipped
    std::string reason() const;          // empty when it stepped; else names the first bad parameter
    const OverflowRecord* overflow() const;        // null when it stepped (or skipped with no record)

private:
    std::shared_ptr<detail::StepOutcome> outcome_;  // null: stepped
};

}  // namespace ampgrad::amp
