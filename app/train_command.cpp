// train_command.cpp: `ampgrad train` (app/commands.hpp). One TrainRun opens or resumes the
// Trainer, prints the banner, runs the steps (metrics, eval, checkpoints, profiling on the way),
// saves the final checkpoint and prints the summary. Only rank 0 prints and writes files; every
// rank trains, evaluates and samples, so that the ranks run the same collectives.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>

#include "app/async_checkpoint.hpp"
#include "app/auto_restart.hpp"
#include "app/checkpoint.hpp"
#include "app/commands.hpp"
#include "app/hellaswag_eval.hpp"
#include "app/lora_run.hpp"
#include "app/profile_run.hpp"
#include "app/report.hpp"
#include "app/resume_flags.hpp"
#include "app/tensorboard_log.hpp"
#include "app/trainer.hpp"
#include "core/atomic_file.hpp"
#include "core/device_properties.hpp"
#include "core/error.hpp"
#include "core/json_file.hpp"
#include "models/lora.hpp"

namespace ampgrad::app {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// --resume --steps N: the run now ends at step N, the cosine decay spans N steps, and the learning
// rate continues from the new curve's value at the current step (docs/gpt.md §5), which is printed.
void change_schedule(Trainer& trainer, int64_t steps) {
    const int64_t at = trainer.step(), saved = trainer.config().steps;
    const double before = trainer.lr_at(at);
    trainer.set_steps(steps);
    if (trainer.rank() == 0)
        std::printf("--steps %lld: the schedule now spans %lld steps (saved: %lld); the learning rate at step %lld is "
                    "%.4g (the saved schedule gives %.4g there)\n", static_cast<long long>(steps),
                    static_cast<long long>(steps), static_cast<long long>(saved), static_cast<long long>(at + 1),
                    trainer.lr_at(at), before);
}

// The Trainer of `o`: a checkpoint's (--resume, checked against the flags given) or a new one.
std::unique_ptr<Trainer> open_trainer(const TrainOptions& o) {
    if (o.resume.empty()) {
        if (!o.run.init_from.empty() && o.preset_given)
            throw ValueError(fmt::format("--preset {}: --init-from {} takes the model's sizes from its config.json, so a "
                                         "preset would not be used; drop --preset", *o.preset_given, o.run.init_from));
        return std::make_unique<Trainer>(o.run);
    }
    const std::string dir = resolve_checkpoint(o.resume);
    const nlohmann::json saved = read_checkpoint_state(dir).at("run_config");
    check_checkpoint_preset(o.preset_given, saved.at("preset").get<std::string>(), dir);
    const ResumeOverrides overrides = with_json_errors("checkpoint", dir, [&] {
        return check_resume_flags(o.run, o.flags_given, saved, dir);
    });
    std::unique_ptr<Trainer> trainer = Trainer::resume(dir, o.zero_given, /*for_inference=*/false, overrides);
    if (trainer->rank() == 0)
        std::printf("resumed from %s at step %lld\n", dir.c_str(), static_cast<long long>(trainer->step()));
    if (overrides.steps) change_schedule(*trainer, *overrides.steps);
    apply_hellaswag_flags(*trainer, o.run, o.flags_given);
    return trainer;
}

// A checkpoint of the run so far: a ZeRO checkpoint from every rank with --zero (node-local with
// --ckpt-node-local); data parallel, rank 0 alone writes it (every rank holds the same state).
std::string save_run(Trainer& trainer, const std::string& root, bool node_local) {
    if (trainer.zero()) return trainer.save_zero(root, 2, node_local);
    if (trainer.rank() != 0) return "";
    return save_checkpoint(trainer, root);
}

// A --ckpt-every checkpoint; returns the milliseconds the step was blocked by it. --ckpt-async:
// rank 0 copies the state and writes it in the background (app/async_checkpoint.hpp).
double checkpoint_during_run(Trainer& trainer, const std::string& root, const TrainOptions& o, AsyncCheckpointer* async) {
    const auto start = Clock::now();
    if (async && trainer.rank() == 0) async->save(trainer.checkpoint_content(), root);   // state.json's text too
    else if (!async) save_run(trainer, root, o.ckpt_node_local);
    return 1e3 * seconds_since(start);
}

// The ZeRO line under the banner: the stage, the ranks, and this rank's model-state bytes.
std::string zero_text(const TrainStats& s, int world_size) {
    const zero::ModelStateBytes& b = s.state_bytes;
    return fmt::format("ZeRO stage {} on {} process(es): model states {:.2f} MB per rank (params {:.2f} + grads {:.2f} "
                       "+ optimizer {:.2f})", s.zero_stage, world_size, static_cast<double>(b.total()) / 1e6,
                       static_cast<double>(b.params) / 1e6, static_cast<double>(b.grads) / 1e6,
                       static_cast<double>(b.optimizer) / 1e6);
}

void check_checkpoint_mode(const TrainOptions& o, Trainer& trainer) {
    if (o.ckpt_async && trainer.zero())
        throw ValueError("--ckpt-async: ZeRO checkpoints (--zero 0 to 3), which every rank writes, are saved "
                         "synchronously; drop --ckpt-async, or train without --zero");
    if (o.ckpt_node_local && !trainer.zero())
        throw ValueError("--ckpt-node-local: applies to ZeRO checkpoints (--zero 0 to 3), which every rank writes; "
                         "without --zero, rank 0 alone writes the checkpoint");
}

void print_eval(ProgressLine& progress, const EvalStats& e) {
    std::string line = fmt::format("eval step {}: train loss {:.4f}, val loss {:.4f}", e.step, e.train_loss, e.val_loss);
    if (e.exact_match) line = fmt::format("eval step {}: loss {:.4f}, exact match {:.1f}% (held-out problems)", e.step,
                                          e.train_loss, 100.0 * *e.exact_match);
    progress.message(line);
}

// The lines above the progress: the model, the data, the layout, the accumulation, and warnings.
void print_banner(const TrainOptions& o, const Trainer& trainer) {
    const RunConfig& cfg = trainer.config();
    const LanguageModel& lm = trainer.model();
    // A run from a Hugging Face folder has the folder's sizes, not a preset's.
    const std::string model_source = cfg.init_from.empty() ? "preset " + cfg.preset : "from " + cfg.init_from;
    std::printf("ampgrad train: %s %s (%s; %.2fM parameters), %s, %s on %s, "
                "batch %lld, %lld steps\n  data: %s (%s tokenizer)\n  out: %s\n",
                lm.kind().c_str(), model_source.c_str(), lm.shape_text().c_str(),
                static_cast<double>(lm.num_parameters()) / 1e6, cfg.task.c_str(), cfg.prec.c_str(), cfg.device.c_str(), static_cast<long long>(cfg.batch_size),
                static_cast<long long>(cfg.steps), trainer.corpus().source.c_str(),
                trainer.corpus().tokenizer.kind_name(), o.out.c_str());
    if (!cfg.init_from.empty() && o.resume.empty())
        std::printf("  init: the Hugging Face %s weights in %s\n", lm.title().c_str(), cfg.init_from.c_str());
    if (const std::string lora = lora_banner_line(cfg, *lm.causal_lm_ptr()); !lora.empty()) std::printf("%s\n", lora.c_str());
    if (trainer.data_parallel() && cfg.batch_size % trainer.world_size() == 0)
        std::printf("data parallel on %d processes: global batch %lld (%lld per rank)\n", trainer.world_size(),
                    static_cast<long long>(cfg.batch_size), static_cast<long long>(cfg.batch_size / trainer.world_size()));
    if (const std::string elastic = elastic_layout_text(cfg, trainer.world_size(), trainer.layout()); !elastic.empty())
        std::printf("  %s\n", elastic.c_str());
    const int64_t tokenizer_vocab = trainer.corpus().tokenizer.vocab_size(), model_vocab = lm.vocab_size();
    if (cfg.task == "text" && 2 * tokenizer_vocab < model_vocab)   // e.g. a char tokenizer for a byte-level model
        std::printf("  warning: the %s tokenizer has %lld ids, but the model's vocabulary has %lld: most of the model's "
                    "tokens will never be seen (is this the tokenizer the model was trained with? --tokenizer picks "
                    "another)\n", trainer.corpus().tokenizer.kind_name(), static_cast<long long>(tokenizer_vocab),
                    static_cast<long long>(model_vocab));
    if (cfg.grad_accum > 1)
        std::printf("  gradient accumulation: %lld micro-steps of %lld sequences: %lld tokens per step\n",
                    static_cast<long long>(cfg.grad_accum), static_cast<long long>(cfg.batch_size),
                    static_cast<long long>(cfg.grad_accum * cfg.batch_size * lm.block_size()));
    if (cfg.warmup > cfg.steps)
        std::printf("  warning: --warmup %lld is longer than --steps %lld: the learning rate never reaches --lr %g (it "
                    "ends at %.3g)\n", static_cast<long long>(cfg.warmup), static_cast<long long>(cfg.steps), cfg.lr,
                    trainer.lr_at(cfg.steps - 1));
}

// One `ampgrad train`: what the loop carries from step to step, and the summary at the end.
class TrainRun {
public:
    TrainRun(const TrainOptions& o, std::unique_ptr<Trainer> trainer);
    void run_steps(StepFile& step_file);
    int finish();

private:
    void after_step(const TrainStats& s);
    void record_step(const TrainStats& s);
    void print_summary(const std::string& checkpoint, const std::string& sample_text, double seconds) const;

    const TrainOptions& o_;
    std::unique_ptr<Trainer> trainer_;
    const RunConfig& cfg_;
    const bool lead_;                       // rank 0: prints and writes files
    const int64_t last_;                    // the step this invocation stops after (--until)
    const std::string metrics_path_, ckpt_root_;
    std::optional<MetricsLog> metrics_;     // rank 0 only
    std::unique_ptr<TensorboardLog> tb_;    // --tensorboard
    StepProfiler step_profiler_;            // --profile
    ProgressLine progress_;
    std::optional<double> mfu_factor_;
    std::unique_ptr<AsyncCheckpointer> async_ckpt_;   // --ckpt-async
    SaveBlockTimes save_blocked_;
    std::unique_ptr<HellaswagDuringTraining> hellaswag_;   // --hellaswag
    Clock::time_point start_;
    int64_t tokens_ = 0;
    std::optional<EvalStats> final_eval_;
    std::optional<std::string> zero_line_;
};

bool progress_in_place(const TrainOptions& o) {
    return o.progress == "line" || (o.progress == "auto" && ::isatty(STDOUT_FILENO));
}

TrainRun::TrainRun(const TrainOptions& o, std::unique_ptr<Trainer> trainer)
    : o_(o), trainer_(std::move(trainer)), cfg_(trainer_->config()), lead_(trainer_->rank() == 0),
      last_(o.until > 0 ? std::min(o.until, cfg_.steps) : cfg_.steps),
      metrics_path_((fs::path(o.out) / "metrics.jsonl").string()),
      ckpt_root_((fs::path(o.out) / "checkpoints").string()),
      step_profiler_(o.profile_steps, trainer_->step(), o.out, trainer_->rank()),
      progress_(cfg_.steps, trainer_->step(), progress_in_place(o), o.log_every),
      mfu_factor_(mfu_per_token_per_s(trainer_->model(), cfg_.device, trainer_->world_size())) {
    if (lead_) {
        metrics_.emplace(metrics_path_, o.resume.empty() ? 0 : trainer_->step());
        note_restart(*metrics_, trainer_->step(), o.resume);   // when ampgrad-run restarted the run
    }
    tb_ = TensorboardLog::open_if_asked(o.tensorboard, *trainer_);
    print_banner(o, *trainer_);
    if (mfu_factor_) progress_.set_mfu_per_token_per_s(*mfu_factor_);
    nn::Module& module = *trainer_->model().module();
    if (!models::lora_layers(module).empty()) {   // a LoRA run: what trains, on every line
        const auto [trainable, total] = models::trainable_and_total_parameters(module);
        progress_.set_parameter_counts(trainable, total);
    }
    start_ = Clock::now();   // the run's clock includes the async checkpointer's and HellaSwag's set-up
    if (o.ckpt_async) {   // the fence: the background copy of the last save must be done before the optimizer writes
        async_ckpt_ = std::make_unique<AsyncCheckpointer>();
        trainer_->set_before_optimizer_step([this] {
            if (const double ms = async_ckpt_->wait_for_copy(); ms > 0.0) save_blocked_.add_fence(ms);
        });
    }
    hellaswag_ = HellaswagDuringTraining::make(*trainer_);
    if (hellaswag_) std::printf("%s\n", hellaswag_->describe(cfg_).c_str());
}

void TrainRun::run_steps(StepFile& step_file) {
    while (trainer_->step() < last_) {
        step_profiler_.before_step(trainer_->step() + 1);
        step_file.starting(trainer_->step() + 1);
        const TrainStats s = trainer_->train_step();
        tokens_ += s.tokens;
        record_step(s);
        after_step(s);
        step_profiler_.after_step(s.step);
    }
    step_profiler_.finish();
}

// The step's line, metrics and TensorBoard scalars (rank 0), and the ZeRO memory line.
void TrainRun::record_step(const TrainStats& s) {
    const int world = trainer_->world_size();
    if (s.zero_stage >= 0) {   // shown after the first step; the last step's figure closes the run
        if (!zero_line_) progress_.message(zero_text(s, world) + " after step " + std::to_string(s.step));
        zero_line_ = zero_text(s, world) + " at step " + std::to_string(s.step);
    }
    if (!lead_) return;
    progress_.update(s);
    if (!s.fp8.is_null() && !s.fp8.at("events").empty())   // --prec fp8: where it saturated or collapsed (app/fp8_run.hpp)
        progress_.message(fp8_events_line(s.step, s.fp8.at("events")));
    const double elapsed = seconds_since(start_);
    const double tokens_per_s = elapsed > 0 ? static_cast<double>(tokens_) / elapsed : 0.0;
    const std::optional<double> mfu = mfu_factor_ ? std::optional<double>(tokens_per_s * *mfu_factor_) : std::nullopt;
    metrics_->train(s, tokens_per_s, elapsed, mfu);
    if (tb_) tb_->train(s, tokens_per_s, mfu, *trainer_);
}

// Evaluation, HellaSwag and --ckpt-every checkpoints after a step.
void TrainRun::after_step(const TrainStats& s) {
    // Every rank evaluates (no collectives in it), so that none waits past the group's timeout.
    if ((cfg_.eval_every > 0 && s.step % cfg_.eval_every == 0) || s.step == cfg_.steps) {
        final_eval_ = trainer_->evaluate();
        if (lead_) {
            metrics_->eval(*final_eval_);
            if (tb_) tb_->eval(*final_eval_);
            print_eval(progress_, *final_eval_);
        }
    }
    if (hellaswag_) hellaswag_->after_step(*trainer_, s.step, progress_, lead_ ? &*metrics_ : nullptr);
    if (o_.ckpt_every > 0 && s.step % o_.ckpt_every == 0 && s.step != last_)
        save_blocked_.add(checkpoint_during_run(*trainer_, ckpt_root_, o_, async_ckpt_.get()));
}

int TrainRun::finish() {
    const double seconds = seconds_since(start_);
    if (async_ckpt_) async_ckpt_->wait();   // the background save in flight, before the final one
    const std::string saved = save_run(*trainer_, ckpt_root_, o_.ckpt_node_local);
    // Every rank draws the sample (the same number of forwards everywhere: stage 3 gathers in each).
    std::string sample_text;
    if (o_.sample_tokens > 0 && cfg_.task == "text") sample_text = trainer_->sample("\n", o_.sample_tokens, 0.8, 40);
    if (!lead_) return 0;
    if (tb_ && !sample_text.empty()) tb_->sample(trainer_->step(), sample_text);
    progress_.finish();
    print_summary(saved, sample_text, seconds);
    return 0;
}

void TrainRun::print_summary(const std::string& checkpoint, const std::string& sample_text, double seconds) const {
    std::printf("trained to step %lld in %.1f s (%.0f tokens/s); %lld skipped steps\ncheckpoint: %s\nmetrics: %s\n",
                static_cast<long long>(trainer_->step()), seconds, seconds > 0 ? static_cast<double>(tokens_) / seconds : 0.0,
                static_cast<long long>(trainer_->skipped_steps()), checkpoint.c_str(), metrics_path_.c_str());
    if (zero_line_) std::printf("%s\n", zero_line_->c_str());
    if (save_blocked_.saves > 0) std::printf("%s\n", save_blocked_.describe(o_.ckpt_async).c_str());
    if (step_profiler_.written()) std::printf("trace: %s (ampgrad trace summary; docs/profiling.md)\n", step_profiler_.written()->c_str());
    if (!o_.plot_dir.empty()) {
        std::vector<std::string> files = write_plots(metrics_path_, o_.plot_dir);
        std::printf("plots: %s\n", fmt::format("{}", fmt::join(files, ", ")).c_str());
    }
    if (final_eval_)
        std::printf("final eval: train loss %.4f, val loss %.4f%s\n", final_eval_->train_loss, final_eval_->val_loss,
                    final_eval_->exact_match ? fmt::format(", exact match {:.1f}%", 100.0 * *final_eval_->exact_match).c_str()
                                             : "");
    if (o_.sample_tokens > 0 && cfg_.task == "text")
        std::printf("sample (temperature 0.8, top-k 40):\n----\n%s\n----\n", sample_text.c_str());
}

}  // namespace

int run_train(const TrainOptions& typed) {
    StepFile step_file;   // the step in progress, for ampgrad-run (AMPGRAD_STEP_FILE); 0: starting up
    step_file.starting(0);
    TrainOptions o = typed;
    if (o.resume == "auto") o.resume = newest_checkpoint(o.out).value_or("");   // none yet: a fresh start
    std::unique_ptr<Trainer> trainer = open_trainer(o);
    check_checkpoint_mode(o, *trainer);
    if (trainer->rank() != 0 && std::freopen("/dev/null", "w", stdout) == nullptr)
        throw IOError(fmt::format("rank {}: cannot silence its standard output", trainer->rank()));
    ampgrad::create_directories(o.out, "--out");
    TrainRun run(o, std::move(trainer));
    run.run_steps(step_file);
    return run.finish();
}

}  // namespace ampgrad::app
