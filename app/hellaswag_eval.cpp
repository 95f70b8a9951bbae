// hellaswag_eval.cpp: the multiple-choice scorer of app/hellaswag_eval.hpp: one (4,T) forward per
// example, each ending's token losses gathered from an f32 log-softmax, and the three argmins.
#include "app/hellaswag_eval.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"
#include "core/philox.hpp"

namespace ampgrad::app {

namespace {

constexpr int64_t kRows = data::kHellaswagEndings;

// The first index of the smallest value (torch.argmin's choice on a tie).
int argmin(const std::array<double, data::kHellaswagEndings>& v) {
    int best = 0;
    for (int i = 1; i < kRows; ++i)
        if (v[static_cast<size_t>(i)] < v[static_cast<size_t>(best)]) best = i;
    return best;
}

// Eval mode and the RNG for the scope; both put back on the way out (an exception too).
class EvalScope {
public:
    explicit EvalScope(nn::Module& m) : module_(m), was_training_(m.is_training()), rng_(get_rng_state()) { m.eval(); }
    ~EvalScope() {
        set_rng_state(rng_);
        module_.train(was_training_);
    }
    EvalScope(const EvalScope&) = delete;
    EvalScope& operator=(const EvalScope&) = delete;

private:
    nn::Module& module_;
    bool was_training_;
    GeneratorState rng_;
    NoGradGuard no_grad_;
};

// log p(token t+1 | tokens 0..t) for every row and t < T-1, on the host: (4,T-1) row-major.
std::vector<float> next_token_log_probs(const LogitsFn& forward, const data::HellaswagBatch& b, Device device,
                                        const AutocastFn& autocast) {
    const int64_t T = b.T;
    Tensor idx = tensor(std::vector<int64_t>(b.ids.begin(), b.ids.end()), {kRows, T}).to(device);   // (4,T) int64
    Tensor logits;
    {
        std::unique_ptr<amp::AutocastGuard> guard = autocast ? autocast() : nullptr;
        logits = forward(idx);                                                                        // (4,T,V)
    }
    if (logits.dim() != 3 || logits.size(0) != kRows || logits.size(1) != T)
        throw ShapeError(fmt::format("hellaswag: the model returned logits {} for ids (4,{})", logits.describe(), T));
    // Position t predicts token t+1: logits 0..T-2 against ids 1..T-1. The log-softmax runs in f32
    // whatever the forward's dtype (autocast, f16 weights).
    Tensor logp = F::log_softmax(logits.narrow(1, 0, T - 1).to(kFloat32).contiguous(), -1);          // (4,T-1,V) f32
    Tensor next = idx.narrow(1, 1, T - 1).contiguous().reshape({kRows, T - 1, 1});                    // (4,T-1,1)
    Tensor picked = gather(logp, 2, next);                                                            // (4,T-1,1)
    return picked.to(kCPU).contiguous().to_vector<float>();
}

}  // namespace

HellaswagScores score_hellaswag(const LogitsFn& forward, const data::HellaswagBatch& b, Device device,
                                const AutocastFn& autocast) {
    const int64_t T = b.T;
    if (T < 2 || static_cast<int64_t>(b.ids.size()) != kRows * T || b.mask.size() != b.ids.size())
        throw ValueError(fmt::format("hellaswag example at line {}: a batch of {} ids and {} mask entries for T = {}",
                                     b.line, b.ids.size(), b.mask.size(), T));
    const std::vector<float> lp = next_token_log_probs(forward, b, device, autocast);   // (4,T-1)
    HellaswagScores s;
    for (size_t i = 0; i < static_cast<size_t>(kRows); ++i) {
        double sum = 0.0;
        int64_t n = 0;
        for (int64_t t = 0; t + 1 < T; ++t) {   // the mask shifted by one: token t+1's loss sits at t
            if (b.mask[i * static_cast<size_t>(T) + static_cast<size_t>(t + 1)] == 0) continue;
            sum -= static_cast<double>(lp[i * static_cast<size_t>(T - 1) + static_cast<size_t>(t)]);
            ++n;
        }
        if (n == 0)
            throw ValueError(fmt::format("hellaswag example at line {}: ending {} has no token after the first position "
                                         "to score", b.line, i));
        s.sum_loss[i] = sum;
        s.scored[i] = n;
        s.mean_loss[i] = sum / static_cast<double>(n);
        s.char_loss[i] = sum / static_cast<double>(std::max<int64_t>(1, b.ending_chars[i]));
    }
    s.pred = argmin(s.sum_loss);
    s.pred_norm = argmin(s.mean_loss);
    s.pred_char_norm = argmin(s.char_loss);
    return s;
}

HellaswagResult evaluate_hellaswag(const LogitsFn& forward, Device device, const std::vector<data::HellaswagBatch>& batches,
                                   std::optional<int64_t> limit, const AutocastFn& autocast) {
    size_t n = batches.size();
    if (limit && *limit >= 0) n = std::min(n, static_cast<size_t>(*limit));
    int64_t right = 0, right_norm = 0, right_char = 0;
    for (size_t k = 0; k < n; ++k) {
        const HellaswagScores s = score_hellaswag(forward, batches[k], device, autocast);
        right += s.pred == batches[k].label;
        right_norm += s.pred_norm == batches[k].label;
        right_char += s.pred_char_norm == batches[k].label;
    }
    HellaswagResult r;
    r.examples = static_cast<int64_t>(n);
    if (n == 0) return r;
    const double total = static_cast<double>(n);
    r.acc = static_cast<double>(right) / total;
    r.acc_norm = static_cast<double>(right_norm) / total;
    r.acc_char_norm = static_cast<double>(right_char) / total;
    return r;
}

HellaswagResult evaluate_hellaswag(LanguageModel& lm, const std::vector<data::HellaswagBatch>& batches,
                                   std::optional<int64_t> limit, const AutocastFn& autocast) {
    EvalScope scope(*lm.module());
    const LogitsFn forward = [&lm](const Tensor& idx) { return lm.forward(idx); };
    return evaluate_hellaswag(forward, lm.device(), batches, limit, autocast);
}

HellaswagResult evaluate_hellaswag(Trainer& trainer, const std::vector<data::HellaswagBatch>& batches,
                                   std::optional<int64_t> limit) {
    const AutocastFn autocast = [&trainer]() {
        return trainer.zero() ? trainer.zero()->autocast() : trainer.precision().autocast();
    };
    return evaluate_hellaswag(trainer.model(), batches, limit, autocast);
}

std::vector<data::HellaswagBatch> load_hellaswag(const std::string& path, const data::Tokenizer& tok, int64_t context,
                                                 std::optional<int64_t> limit) {
    const std::vector<data::HellaswagExample> examples = data::read_hellaswag(path);
    size_t n = examples.size();
    if (limit && *limit >= 0) n = std::min(n, static_cast<size_t>(*limit));
    std::vector<data::HellaswagBatch> out;
    out.reserve(n);
    for (size_t k = 0; k < n; ++k) {
        try {
            out.push_back(data::render_hellaswag(examples[k], tok, context));
        } catch (const ValueError& e) {
            throw ValueError(fmt::format("{}: {} (the {} tokenizer must spell the whole text: a byte or BPE tokenizer "
                                         "does)", path, e.what(), tok.kind_name()));
        }
    }
    return out;
}

std::string hellaswag_text(const std::string& path, const HellaswagResult& r) {
    return fmt::format("hellaswag {}: {} examples, acc {:.4f}, acc_norm {:.4f} (summed / per-token-mean log-likelihood "
                       "of each ending); acc_char_norm {:.4f} (per character, lm-eval's acc_norm)",
                       path, r.examples, r.acc, r.acc_norm, r.acc_char_norm);
}

std::unique_ptr<HellaswagDuringTraining> HellaswagDuringTraining::make(Trainer& trainer) {
    const RunConfig& cfg = trainer.config();
    if (cfg.hellaswag.empty()) return nullptr;
    auto h = std::make_unique<HellaswagDuringTraining>();
    const std::optional<int64_t> limit = cfg.hellaswag_limit > 0 ? std::optional<int64_t>(cfg.hellaswag_limit) : std::nullopt;
    h->batches_ = load_hellaswag(cfg.hellaswag, trainer.corpus().tokenizer, trainer.model().block_size(), limit);
    return h;
}

std::string HellaswagDuringTraining::describe(const RunConfig& cfg) const {
    return fmt::format("  hellaswag: {}, {} examples, {}", cfg.hellaswag, batches_.size(),
                       cfg.hellaswag_every > 0 ? fmt::format("every {} steps and at the end", cfg.hellaswag_every)
                                               : std::string("at the end"));
}

void HellaswagDuringTraining::after_step(Trainer& trainer, int64_t step, ProgressLine& progress, MetricsLog* metrics) {
    const RunConfig& cfg = trainer.config();
    if (!((cfg.hellaswag_every > 0 && step % cfg.hellaswag_every == 0) || step == cfg.steps)) return;
    const HellaswagResult r = evaluate_hellaswag(trainer, batches_);
    if (metrics == nullptr) return;   // not rank 0
    metrics->record({{"kind", "hellaswag"}, {"step", step}, {"hellaswag_examples", r.examples},
                     {"hellaswag_acc", r.acc}, {"hellaswag_acc_norm", r.acc_norm},
                     {"hellaswag_acc_char_norm", r.acc_char_norm}});
    progress.message(fmt::format("hellaswag step {}: {} examples, acc {:.4f}, acc_norm {:.4f}, acc_char_norm {:.4f}",
                                 step, r.examples, r.acc, r.acc_norm, r.acc_char_norm));
}

void apply_hellaswag_flags(Trainer& trainer, const RunConfig& typed, const std::vector<std::string>& flags_given) {
    auto given = [&](const char* flag) {
        return std::find(flags_given.begin(), flags_given.end(), flag) != flags_given.end();
    };
    const RunConfig& saved = trainer.config();
    trainer.set_hellaswag(given("--hellaswag") ? typed.hellaswag : saved.hellaswag,
                          given("--hellaswag-every") ? typed.hellaswag_every : saved.hellaswag_every,
                          given("--hellaswag-limit") ? typed.hellaswag_limit : saved.hellaswag_limit);
}

}  // namespace ampgrad::app
