// deterministic_run.cpp: the trainer's side of --deterministic (app/deterministic_run.hpp).
#include "app/deterministic_run.hpp"

#include <fmt/format.h>

#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/philox.hpp"
#include "dist/process_group.hpp"
#include "dist/tree_reduce.hpp"

namespace ampgrad::app {

uint64_t keyed_seed(uint64_t seed, int64_t step, int64_t global_micro_batch, KeyedStream stream) {
    const uint64_t counter_hi = (static_cast<uint64_t>(stream) << 48) ^ static_cast<uint64_t>(step);
    const std::array<uint32_t, 4> r = Philox4x32::generate(seed, counter_hi, static_cast<uint64_t>(global_micro_batch));
    return (static_cast<uint64_t>(r[0]) << 32) | r[1];
}

void check_deterministic_run(const RunConfig& cfg, int world_size) {
    if (!cfg.deterministic) return;
    if (cfg.zero < 0)
        throw ValueError("--deterministic: the deterministic mode runs in the ZeRO engine; add --zero 0 (plain data "
                         "parallelism, in one process too), or --zero 1, 2 or 3");
    dist::check_tree_layout(world_size, cfg.grad_accum, "--deterministic");
}

double tree_mean_loss(const std::vector<double>& mine, bool distributed) {
    std::vector<double> all = mine;   // global micro-batch order: rank 0's, then rank 1's, ...
    if (distributed && dist::world_size() > 1) {
        const int64_t n = static_cast<int64_t>(mine.size());
        Tensor local = tensor(mine);                                                                // (accum) f64
        Tensor gathered = zeros({n * dist::world_size()}, TensorOptions().dtype(kFloat64));       // (W*accum)
        dist::all_gather(gathered, local);
        all = gathered.to_vector<double>();
    }
    return dist::tree_sum(all) / static_cast<double>(all.size());
}

}  // namespace ampgrad::app
