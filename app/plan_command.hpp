// plan_command.hpp: `ampgrad plan`: the bytes per rank a training run will need, before it runs
// (app/memory_plan.hpp), with the largest term named and the flag that would cut the peak most.
#pragma once
#include <string>

#include "app/memory_plan.hpp"

namespace ampgrad::app {

struct PlanOptions {
    PlanRequest request;      // train's flags (run), --world-size, --vocab-size
    bool json = false;        // --json: the plan as one JSON object (for scripts and tests)
};

// The one change of flags (--checkpoint-blocks, --zero N on some ranks, --prec bf16, half the batch
// with twice the accumulation) that lowers the peak most, as "FLAG: OLD -> NEW"; empty if none does.
std::string best_cut(const PlanRequest& request, const MemoryPlan& plan);
nlohmann::json plan_json(const MemoryPlan& plan);
int run_plan(PlanOptions& options);

}  // namespace ampgrad::app
