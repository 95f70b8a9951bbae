// fp8_run.hpp: `--prec fp8` in the command (docs/fp8.md §9): the recipe a run's flags name, the
// data-parallel amax reduction (all_reduce MAX, as Transformer Engine reduces amaxes over its
// fp8_group), and the per-step report (provenance lines and per-layer amaxes for metrics.jsonl).
// Precision (one process and DDP) and ZeroTraining (--zero) both hold an Fp8Run.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "amp/autocast.hpp"
#include "amp/fp8_recipe.hpp"
#include "app/run_config.hpp"
#include "nn/module.hpp"

namespace ampgrad::app {

// --fp8-recipe delayed: DelayedScaling(HYBRID, margin 0, amax_history_len 16, "max"); tensorwise
// and rowwise: torchao's current scaling. The first and last Linear stay in bf16.
amp::Fp8Recipe fp8_recipe_of(const RunConfig& cfg);

// One progress line for a step's events: the first in full, and how many more (all are in metrics.jsonl).
std::string fp8_events_line(int64_t step, const nlohmann::json& events);

class Fp8Run {
public:
    Fp8Run(const RunConfig& cfg, nn::Module& model);
    std::unique_ptr<amp::AutocastGuard> autocast() const;   // bf16 autocast with the Linear layers in fp8
    // After the optimiser step: reduce the amaxes over the data-parallel ranks (when there are
    // several), update the scales and roll the histories; no host sync.
    void update();
    // The last update's saturated amaxes and collapsed scales, one line each (HOST SYNC).
    std::vector<std::string> events() const;
    // metrics.jsonl's "fp8" field of a step (HOST SYNC): {"events": [lines], "layers": {layer:
    // {"input": [amax], "weight": [amax], "grad_output": [amax], "scale": [3 scales]}}}.
    nlohmann::json step_report() const;
    nn::NamedTensors state_tensors() const { return training_.state_tensors(); }
    void load_state_tensors(const nn::NamedTensors& tensors) { training_.load_state_tensors(tensors); }

private:
    DeviceType device_;
    amp::Fp8Training training_;
};

}  // namespace ampgrad::app
