// step_result.cpp: resolving a step's outcome: reading the device flag once, then locating the first
// non-finite gradient (only on a skip, so the per-parameter reads cost nothing in the common case).
#include "amp/step_result.hpp"

#include <optional>
#include <utility>

#include <fmt/format.h>

#include "amp/loss_scaler.hpp"

namespace ampgrad::amp::detail {

namespace {

std::string skip_reason(const OverflowRecord& rec) {
    return fmt::format("non-finite gradient: first in {} ({} element{} inf/NaN) at iteration {}, scale {}; step "
                       "skipped, the scale will back off in update()",
                       rec.param, rec.nonfinite_count, rec.nonfinite_count == 1 ? "" : "s", rec.iteration, rec.scale);
}

}  // namespace

void StepOutcome::resolve() {
    if (resolved) return;
    settle(found_inf.item<float>() != 0.0f);                                  // HOST SYNC: the deferred read
}

void StepOutcome::settle(bool step_skipped) {
    resolved = true;
    skipped = step_skipped;
    if (skipped) {
        record.scale = scale.item<float>();                                   // HOST SYNC (skips only)
        record.param = "(not located: the result was read after update(), when the gradients may have changed)";
        if (!param_groups.empty()) locate_overflow();
        reason = skip_reason(record);
    }
    found_inf = Tensor();
    scale = Tensor();
    forget_gradients();
}

// The first parameter, in group order, whose gradient holds an inf or NaN (one host read per parameter).
void StepOutcome::locate_overflow() {
    std::vector<Tensor> params;
    std::vector<std::pair<size_t, size_t>> positions;                        // (group, index) of each
    for (size_t g = 0; g < param_groups.size(); ++g)
        for (size_t i = 0; i < param_groups[g].size(); ++i) {
            params.push_back(param_groups[g][i]);
            positions.emplace_back(g, i);
        }
    record.param = "(unknown)";
    if (std::optional<NonFiniteGrad> bad = first_nonfinite_grad(params)) {
        auto [g, i] = positions[bad->index];
        record.param = param_label(params[bad->index], g, i);
        record.nonfinite_count = bad->count;
    }
}

void StepOutcome::forget_gradients() { param_groups.clear(); }

std::string param_label(const Tensor& p, size_t group, size_t index) {
    std::string name = p.name();
    if (!name.empty()) return name;
    return fmt::format("param_groups[{}].params[{}] {}", group, index, p.describe());
}

}  // namespace ampgrad::amp::detail

namespace ampgrad::amp {

StepResult StepResult::skipped_with(std::string reason) {
    auto outcome = std::make_shared<detail::StepOutcome>();
    outcome->skipped = true;
    outcome->reason = std::move(reason);
    return StepResult(std::move(outcome));
}

bool StepResult::ready() const { return !outcome_ || outcome_->resolved; }

bool StepResult::skipped() const {
    if (!outcome_) return false;
    outcome_->resolve();
    return outcome_->skipped;
}

std::string StepResult::reason() const { return skipped() ? outcome_->reason : std::string(); }

const OverflowRecord* StepResult::overflow() const {
    return skipped() && !outcome_->record.param.empty() ? &outcome_->record : nullptr;
}

}  // namespace ampgrad::amp
