// tensorboard_log.cpp: the scalars, histograms and text of `ampgrad train --tensorboard DIR`
// (app/tensorboard_log.hpp).
#include "app/tensorboard_log.hpp"

#include <cmath>

#include "autograd/grad_mode.hpp"
#include "core/allocator.hpp"

namespace ampgrad::app {

namespace {

// The histogram of a parameter or gradient on any device and in any dtype, read as f32 on the host.
tensorboard::Histogram histogram_of_tensor(const Tensor& t) {
    NoGradGuard no_grad;
    const std::vector<float> values = t.detach().to(kCPU).to(kFloat32).contiguous().to_vector<float>();
    return tensorboard::histogram_of(values);
}

}  // namespace

std::unique_ptr<TensorboardLog> TensorboardLog::open_if_asked(const TensorboardFlags& flags, const Trainer& trainer) {
    if (flags.dir.empty() || trainer.rank() != 0) return nullptr;
    return std::make_unique<TensorboardLog>(flags, trainer.config());
}

TensorboardLog::TensorboardLog(const TensorboardFlags& flags, const RunConfig& cfg)
    : flags_(flags), logs_loss_scale_(cfg.prec.starts_with("fp16")), writer_(flags.dir) {}

void TensorboardLog::train(const TrainStats& s, double tokens_per_s, std::optional<double> mfu, Trainer& trainer) {
    writer_.add_scalar("train/loss", s.loss, s.step);
    writer_.add_scalar("train/lr", s.lr, s.step);
    if (std::isfinite(s.grad_norm)) writer_.add_scalar("train/grad_norm", s.grad_norm, s.step);
    if (logs_loss_scale_) writer_.add_scalar("train/loss_scale", s.scale, s.step);
    writer_.add_scalar("train/skipped_steps", static_cast<double>(s.skipped_total), s.step);
    writer_.add_scalar("perf/tokens_per_s", tokens_per_s, s.step);
    writer_.add_scalar("perf/data_ms", 1e3 * s.data_seconds, s.step);
    if (mfu) writer_.add_scalar("perf/mfu", *mfu, s.step);
    const Device device = trainer.model().device();
    writer_.add_scalar("memory/allocated_bytes", static_cast<double>(memory_allocated(device)), s.step);
    writer_.add_scalar("memory/peak_allocated_bytes", static_cast<double>(max_memory_allocated(device)), s.step);
    if (flags_.hist_every > 0 && s.step % flags_.hist_every == 0) histograms(s.step, trainer);
}

// Under ZeRO stage 3 a rank holds only its shard of the parameters, and under stages 2-3 of the
// gradients: the histograms then show rank 0's part (empty tensors are left out).
void TensorboardLog::histograms(int64_t step, Trainer& trainer) {
    for (const auto& [name, p] : trainer.model().module()->named_parameters()) {
        if (p.numel() > 0) writer_.add_histogram("weights/" + name, histogram_of_tensor(p), step);
        const Tensor& g = p.grad();
        if (g.defined() && g.numel() > 0) writer_.add_histogram("grads/" + name, histogram_of_tensor(g), step);
    }
    writer_.flush();
}

void TensorboardLog::eval(const EvalStats& e) {
    writer_.add_scalar("eval/train_loss", e.train_loss, e.step);
    writer_.add_scalar("eval/val_loss", e.val_loss, e.step);
    if (e.exact_match) writer_.add_scalar("eval/exact_match", *e.exact_match, e.step);
    writer_.flush();
}

void TensorboardLog::sample(int64_t step, const std::string& text) {
    // TensorBoard renders text as markdown: a code block keeps the sample's line breaks and symbols.
    writer_.add_text("sample", "```\n" + text + "\n```", step);
    writer_.flush();
}

}  // namespace ampgrad::app
