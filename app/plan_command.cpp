// plan_command.cpp: `ampgrad plan` (app/plan_command.hpp): plans the run, then tries each flag that
// trades memory for something else and names the one that cuts the peak most.
#include "app/plan_command.hpp"

#include <cstdio>
#include <functional>

#include <fmt/format.h>

namespace ampgrad::app {

namespace {

struct Candidate {
    std::string flag;                          // as the user would type it
    std::function<void(PlanRequest&)> apply;
};

std::vector<Candidate> candidates(const PlanRequest& r) {
    std::vector<Candidate> c;
    if (!r.run.checkpoint_blocks)
        c.push_back({"--checkpoint-blocks", [](PlanRequest& q) { q.run.checkpoint_blocks = true; }});
    // More ranks keep each rank's batch: --batch-size grows with them.
    const int ranks = r.world_size > 1 ? r.world_size : 8;
    const int64_t batch = r.run.batch_size / r.world_size * ranks;
    for (int64_t stage = std::max<int64_t>(r.run.zero + 1, 1); stage <= 3 && r.run.prec != "fp16"; ++stage)
        c.push_back({fmt::format("--zero {} --world-size {} --batch-size {}", stage, ranks, batch),
                     [stage, ranks, batch](PlanRequest& q) {
                         q.run.zero = stage;
                         q.world_size = ranks;
                         q.run.batch_size = batch;
                     }});
    if (r.run.prec == "fp32") c.push_back({"--prec bf16", [](PlanRequest& q) { q.run.prec = "bf16"; }});
    if (r.run.batch_size % (2 * r.world_size) == 0)
        c.push_back({fmt::format("--batch-size {} --grad-accum {}", r.run.batch_size / 2, 2 * r.run.grad_accum),
                     [](PlanRequest& q) {
                         q.run.batch_size /= 2;
                         q.run.grad_accum *= 2;
                     }});
    return c;
}

}  // namespace

std::string best_cut(const PlanRequest& request, const MemoryPlan& plan) {
    std::string best;
    int64_t lowest = plan.total_bytes;
    for (const Candidate& c : candidates(request)) {
        PlanRequest q = request;
        c.apply(q);
        const MemoryPlan alt = plan_memory(q);
        if (alt.total_bytes < lowest) {
            lowest = alt.total_bytes;
            best = fmt::format("{} cuts the peak most: {} -> {} per rank ({:.0f}% less; then the largest is {})", c.flag,
                               format_bytes(plan.total_bytes), format_bytes(alt.total_bytes),
                               100.0 * static_cast<double>(plan.total_bytes - alt.total_bytes) /
                                   static_cast<double>(plan.total_bytes), alt.largest);
        }
    }
    return best;
}

nlohmann::json plan_json(const MemoryPlan& p) {
    nlohmann::json terms = nlohmann::json::array();
    for (const MemoryTerm& t : p.terms) terms.push_back({{"name", t.name}, {"bytes", t.bytes}, {"formula", t.formula}});
    return {{"total_bytes", p.total_bytes}, {"peak_moment", p.peak_moment}, {"terms", terms},
            {"largest", p.largest}, {"advice", p.advice}, {"num_parameters", p.model.num_parameters},
            {"batch_per_rank", p.batch_per_rank}, {"context", p.context}};
}

int run_plan(PlanOptions& o) {
    MemoryPlan plan = plan_memory(o.request);
    plan.advice = best_cut(o.request, plan);
    if (o.json) {
        std::printf("%s\n", plan_json(plan).dump().c_str());
        return 0;
    }
    const RunConfig& r = o.request.run;
    std::printf("%s %s, %lld parameters; --prec %s, %s, %d rank(s), batch %lld per rank x T %lld, grad-accum %lld%s, %s\n",
                r.model.c_str(), r.preset.c_str(), static_cast<long long>(plan.model.num_parameters), r.prec.c_str(),
                r.zero >= 0 ? fmt::format("--zero {}", r.zero).c_str() : "no ZeRO", o.request.world_size,
                static_cast<long long>(plan.batch_per_rank), static_cast<long long>(plan.context),
                static_cast<long long>(r.grad_accum), r.checkpoint_blocks ? ", --checkpoint-blocks" : "", r.device.c_str());
    std::printf("%s", format_plan(plan).c_str());
    return 0;
}

}  // namespace ampgrad::app
