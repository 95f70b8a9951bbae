// auto_restart.hpp: what `ampgrad train` does for a launcher that restarts it (ampgrad-run
// --max-restarts N, tools/ampgrad_run.cpp; docs/distributed.md "When a rank fails"):
//   --resume auto       continue from the newest complete checkpoint under --out (what
//                       OUT/checkpoints/latest names, checked), or start fresh when there is none;
//   a "restart" record  in metrics.jsonl when the launcher says this is restart round R
//                       (AMPGRAD_RESTART_COUNT, AMPGRAD_RESTART_CAUSE, as torchrun's
//                       TORCHELASTIC_RESTART_COUNT);
//   the step file       the step in progress, rewritten before each step into AMPGRAD_STEP_FILE
//                       (0 while starting up), so that the launcher can say at which step a rank
//                       failed and stop a run that fails at the same step again instead of looping;
//   the step layout     at a world size the run was not started with (ampgrad-run --nnodes
//                       MIN:MAX), each rank's micro-batch and accumulation that keep the global batch.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace ampgrad::app {

struct RunConfig;   // app/run_config.hpp
class MetricsLog;   // app/report.hpp

// --resume auto: the checkpoint to continue from (a directory), or nullopt for a fresh start when
// OUT holds no checkpoint yet. A `latest` that names no complete checkpoint is an error (IOError or
// CheckpointError naming it), never a silent fresh start over a run's folder.
std::optional<std::string> newest_checkpoint(const std::string& out);

// The restart round the launcher passed (AMPGRAD_RESTART_COUNT > 0), or nullopt on a first start.
struct RestartRound {
    int64_t count = 0;    // 1 for the first restart
    std::string cause;    // the launcher's words: which rank failed, how, at which step
};
std::optional<RestartRound> restart_round_from_env();

// The metrics.jsonl record of a restart: {"kind": "restart", "step": S, "restart": R, "cause": ...,
// "resumed_from": DIR or null}. S is the step the run continues after (0: a fresh start).
nlohmann::json restart_record(const RestartRound& round, int64_t step, const std::optional<std::string>& resumed_from);

// In a restart round (restart_round_from_env): writes its record to `metrics` and says so on stdout.
// resumed_from: the checkpoint directory, "" for a fresh start.
void note_restart(MetricsLog& metrics, int64_t step, const std::string& resumed_from);

// AMPGRAD_STEP_FILE (set by ampgrad-run): holds the number of the step in progress. A no-op when the
// variable is unset.
class StepFile {
public:
    StepFile();
    ~StepFile();
    StepFile(const StepFile&) = delete;
    StepFile& operator=(const StepFile&) = delete;
    void starting(int64_t step);   // rewrites the file with `step` (one small pwrite, no fsync)

private:
    int fd_ = -1;
};

// One step on `world` processes: each rank runs `accum` micro-batches of `micro` sequences, and
// world * micro * accum = batch_size * grad_accum, the run's global batch, whatever the world size.
// The run's own layout (batch_size / world, grad_accum) when the world size divides --batch-size;
// else the fewest micro-steps that split the global batch evenly in micro-batches no larger than
// batch_size / world (at least 1), so that an elastic restart on fewer or more hosts trains on the
// same batch in no more memory; ValueError naming the numbers when no split exists (the run cannot
// keep its global batch at that world size).
struct StepLayout {
    int64_t micro = 1;   // sequences per rank per micro-step
    int64_t accum = 1;   // micro-steps per step
};
StepLayout step_layout(const RunConfig& cfg, int world);

// The banner's line when `layout` is not the run's own split ("3 processes cannot share --batch-size
// 4 equally: 4 micro-steps of 1 sequences per rank keep the global batch of 12 sequences per step"),
// else "".
std::string elastic_layout_text(const RunConfig& cfg, int world, const StepLayout& layout);

}  // namespace ampgrad::app
