// hellaswag_eval.hpp: multiple-choice accuracy of the run's model on examples in HellaSwag's layout
// (data/hellaswag.hpp; docs/data.md). Each example's four candidates go through the model in one
// (4,T) forward; ending i is scored by the loss of predicting each of its tokens from everything
// before it (log-softmax in f32; the padding and the context are masked out), and
//   acc            counts the examples whose right ending has the lowest summed loss (llm.c's acc),
//   acc_norm       ... the lowest mean loss per ending token (llm.c's acc_norm),
//   acc_char_norm  ... the lowest summed loss per character of the ending (lm-eval's acc_norm).
// Used by `ampgrad eval --hellaswag FILE` and `ampgrad train --hellaswag FILE --hellaswag-every N`.
//
//   auto batches = app::load_hellaswag("hellaswag_val.jsonl", tokenizer, lm.block_size());
//   app::HellaswagResult r = app::evaluate_hellaswag(trainer, batches, /*limit=*/1000);
#pragma once
#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amp/autocast.hpp"
#include "app/language_model.hpp"
#include "app/report.hpp"
#include "app/trainer.hpp"
#include "data/hellaswag.hpp"

namespace ampgrad::app {

// idx (B,T) int64 -> logits (B,T,V): LanguageModel::forward, or a stand-in in tests.
using LogitsFn = std::function<Tensor(const Tensor&)>;
// An autocast region for the forward (Precision::autocast, ZeroTraining::autocast), or none.
using AutocastFn = std::function<std::unique_ptr<amp::AutocastGuard>()>;

// The scores of one example's four candidates, in nats.
struct HellaswagScores {
    std::array<double, data::kHellaswagEndings> sum_loss{};    // summed over the ending's scored tokens
    std::array<double, data::kHellaswagEndings> mean_loss{};   // sum_loss / scored
    std::array<double, data::kHellaswagEndings> char_loss{};   // sum_loss / the ending's characters
    std::array<int64_t, data::kHellaswagEndings> scored{};     // ending tokens scored (not at position 0)
    int pred = 0, pred_norm = 0, pred_char_norm = 0;           // the argmins (the first on a tie)
};

struct HellaswagResult {
    int64_t examples = 0;
    double acc = 0.0, acc_norm = 0.0, acc_char_norm = 0.0;    // fractions of the examples
};

// One forward of b's (4,T) ids on `device` (inside autocast() when given); the caller holds
// NoGradGuard and the model's eval mode.
HellaswagScores score_hellaswag(const LogitsFn& forward, const data::HellaswagBatch& b, Device device,
                                const AutocastFn& autocast = {});

// The accuracies over the first `limit` batches (all without one); the caller sets the mode.
HellaswagResult evaluate_hellaswag(const LogitsFn& forward, Device device, const std::vector<data::HellaswagBatch>& batches,
                                   std::optional<int64_t> limit = std::nullopt, const AutocastFn& autocast = {});
// The same for the run's model, under NoGradGuard in eval mode; its mode and the RNG are put back after.
HellaswagResult evaluate_hellaswag(LanguageModel& lm, const std::vector<data::HellaswagBatch>& batches,
                                   std::optional<int64_t> limit = std::nullopt, const AutocastFn& autocast = {});
// The same with the run's autocast (--prec: Precision's, or the ZeRO engine's).
HellaswagResult evaluate_hellaswag(Trainer& trainer, const std::vector<data::HellaswagBatch>& batches,
                                   std::optional<int64_t> limit = std::nullopt);

// Reads `path` and renders its first `limit` examples (all without one) for a model of context
// `context` with tok. Errors name the file and the line.
std::vector<data::HellaswagBatch> load_hellaswag(const std::string& path, const data::Tokenizer& tok, int64_t context,
                                                 std::optional<int64_t> limit = std::nullopt);

// "hellaswag FILE: 1000 examples, acc 0.2950, acc_norm 0.2990 (summed / per-token-mean log-likelihood
// of each ending), acc_char_norm 0.3010 (per character, lm-eval's acc_norm)"
std::string hellaswag_text(const std::string& path, const HellaswagResult& r);

// `ampgrad train --hellaswag FILE [--hellaswag-every N] [--hellaswag-limit N]`: the examples are read
// and rendered once, before the first step (a malformed file or an unspellable character stops the
// run there). Every N steps and at the last step, every rank evaluates (no collectives beyond the
// forwards, which every rank runs alike, so none waits); rank 0 writes {"kind": "hellaswag", "step",
// "hellaswag_acc", "hellaswag_acc_norm", ...} to metrics.jsonl and prints a line.
class HellaswagDuringTraining {
public:
    // Null when the run has no --hellaswag.
    static std::unique_ptr<HellaswagDuringTraining> make(Trainer& trainer);
    void after_step(Trainer& trainer, int64_t step, ProgressLine& progress, MetricsLog* metrics);
    std::string describe(const RunConfig& cfg) const;   // "  hellaswag: FILE, 1000 examples, every 250 steps and at the end"

private:
    std::vector<data::HellaswagBatch> batches_;
};

// --resume with --hellaswag, --hellaswag-every or --hellaswag-limit: the typed values replace the saved
// ones (they change what is measured, not the training, so app/resume_flags.cpp lets them differ).
void apply_hellaswag_flags(Trainer& trainer, const RunConfig& typed, const std::vector<std::string>& flags_given);

}  // namespace ampgrad::app
