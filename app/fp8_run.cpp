// fp8_run.cpp: `--prec fp8` (app/fp8_run.hpp).
#include "app/fp8_run.hpp"

#include <fmt/format.h>

#include "dist/process_group.hpp"

namespace ampgrad::app {

amp::Fp8Recipe fp8_recipe_of(const RunConfig& cfg) {
    amp::Fp8Recipe recipe;
    recipe.scaling = amp::parse_fp8_scaling(cfg.fp8_recipe);
    // TE's default window is 1024 steps; 16 follows a short CPU run's changes sooner and keeps the
    // checkpoint small (docs/fp8.md §8 discusses the choice).
    recipe.amax_history_len = 16;
    return recipe;
}

std::string fp8_events_line(int64_t step, const nlohmann::json& events) {
    std::string line = fmt::format("step {}: {}", step, events.at(0).get<std::string>());
    if (events.size() > 1) line += fmt::format(" (+{} more in metrics.jsonl)", events.size() - 1);
    return line;
}

Fp8Run::Fp8Run(const RunConfig& cfg, nn::Module& model)
    : device_(cfg.device == "cuda" ? kCUDA : kCPU), training_(model, fp8_recipe_of(cfg)) {}

std::unique_ptr<amp::AutocastGuard> Fp8Run::autocast() const {
    return std::make_unique<amp::AutocastGuard>(device_, training_.recipe());
}

void Fp8Run::update() {
    if (dist::is_initialized() && dist::world_size() > 1) {
        training_.update([](Tensor& amax) { dist::all_reduce(amax, dist::ReduceOp::kMax); });
        return;
    }
    training_.update();
}

nlohmann::json Fp8Run::step_report() const {
    return {{"events", events()}, {"layers", training_.amax_json(1)}};
}

std::vector<std::string> Fp8Run::events() const {
    std::vector<std::string> lines;
    for (const amp::Fp8Event& e : training_.events()) lines.push_back(e.str());
    return lines;
}

}  // namespace ampgrad::app
