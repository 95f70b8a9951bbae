// tensorboard_log.hpp: `ampgrad train --tensorboard DIR`: what a run logs to TensorBoard, beside
// metrics.jsonl (app/report.hpp), through io/tensorboard/'s event-file writer. Rank 0 alone writes.
// Tags (docs/profiling.md lists them with their units):
//   train/loss, train/lr, train/grad_norm, train/loss_scale (fp16 and fp16-master), train/skipped_steps
//   perf/tokens_per_s, perf/mfu (where the device's peak is known), perf/data_ms
//   memory/allocated_bytes, memory/peak_allocated_bytes (the device allocator's counters)
//   eval/train_loss, eval/val_loss (at each evaluation), eval/exact_match (the addition task)
//   weights/<parameter>, grads/<parameter>: histograms every --tensorboard-hist-every steps
//   sample: the text sample drawn at the end (markdown, in a code block)
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "app/tensorboard_flags.hpp"
#include "app/trainer.hpp"
#include "io/tensorboard/summary_writer.hpp"

namespace ampgrad::app {

class TensorboardLog {
public:
    // Null unless flags.dir is set and this is rank 0. IOError naming DIR when it cannot be made.
    static std::unique_ptr<TensorboardLog> open_if_asked(const TensorboardFlags& flags, const Trainer& trainer);
    TensorboardLog(const TensorboardFlags& flags, const RunConfig& cfg);

    // One training step: the scalars of metrics.jsonl's "train" record (the same values), and the
    // weight and gradient histograms on every hist_every-th step.
    void train(const TrainStats& s, double tokens_per_s, std::optional<double> mfu, Trainer& trainer);
    void eval(const EvalStats& e);
    void sample(int64_t step, const std::string& text);   // the final sample; flushes
    const std::string& path() const { return writer_.path(); }

private:
    void histograms(int64_t step, Trainer& trainer);
    TensorboardFlags flags_;
    bool logs_loss_scale_;
    tensorboard::SummaryWriter writer_;
};

}  // namespace ampgrad::app
