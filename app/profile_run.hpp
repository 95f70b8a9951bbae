// profile_run.hpp: `ampgrad train --profile N` and `ampgrad trace summary FILE` (docs/profiling.md).
//
// --profile N traces N training steps after one untraced warm-up step: a run that starts at step s0
// (0, or the step it resumed at) traces steps s0+2 .. s0+N+1, so one-time costs of the first step
// (allocator growth, lazy initialisation, the first oneDNN primitives) stay out of the picture, as
// torch.profiler's schedule(wait=0, warmup=1, active=N) leaves them out. Each traced step is a
// "step" span holding everything done for it (forward, backward, optimizer step, evaluation and
// checkpoint when they fall on it). Rank r writes OUT/trace.json (rank 0) or OUT/trace.rank<r>.json,
// its spans on process track pid = r. A run shorter than that traces the steps it has.
//
// trace summary prints the spans of a trace by self time (their time minus the time of the spans
// directly inside them on the same thread), like torch.profiler's key_averages() table.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/profiler.hpp"

namespace ampgrad::app {

class StepProfiler {
public:
    // steps: --profile N (0: off). first_step: the step the run starts from. out_dir: the run folder.
    StepProfiler(int64_t steps, int64_t first_step, const std::string& out_dir, int rank);
    void before_step(int64_t step);   // step: the number the coming step will have
    void after_step(int64_t step);    // after everything done for `step`; writes the trace after the last
    void finish();                    // the run ended early: writes what was traced
    std::optional<std::string> written() const { return written_; }

private:
    void write();
    int64_t first_traced_ = 0, last_traced_ = -1;
    std::string path_;
    int rank_ = 0;
    bool running_ = false;
    std::optional<profiler::Span> step_span_;
    std::optional<std::string> written_;
};

// One row of the summary: every span of one name (and, grouped by input shape, of one operand list).
struct SpanSummary {
    std::string name, category;
    std::string input_shapes;             // grouped by input shape: the kernel's operands, "(M,K) f32 cpu, ..."
    int64_t count = 0;
    double total_us = 0.0, self_us = 0.0;
    double flops = 0.0;                   // the spans' "flops" args, summed (kernels whose FLOPs are known)
};

// The spans of a Chrome trace (its "X" events), per name, by self time (largest first). FormatError
// naming the file when it is not a trace; IOError when it cannot be read.
// group_by_input_shape: a row per (name, operands), as torch.profiler's key_averages(group_by_input_shape=True).
std::vector<SpanSummary> summarize_trace(const std::string& path, bool group_by_input_shape = false);
// A Chrome trace file's JSON; `command` ("trace summary", "trace merge") opens the error messages:
// IOError when it cannot be read, FormatError when it is not JSON or has no "traceEvents" list.
nlohmann::json read_chrome_trace(const std::string& path, const std::string& command);
std::string format_summary(const std::vector<SpanSummary>& rows, size_t top);
int run_trace_summary(const std::string& path, int64_t top, bool group_by_input_shape = false);

}  // namespace ampgrad::app
