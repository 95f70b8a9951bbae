// commands.cpp: train, sample, eval, bench and info (app/commands.hpp).
#include "app/commands.hpp"

#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "amp/autocast_policy.hpp"
#include "ampgrad_config.h"
#include "app/async_checkpoint.hpp"
#include "app/auto_restart.hpp"
#include "app/checkpoint.hpp"
#include "app/export_hf.hpp"
#include "app/hellaswag_eval.hpp"
#include "app/lora_run.hpp"
#include "app/profile_run.hpp"
#include "app/report.hpp"
#include "app/resume_flags.hpp"
#include "app/tensorboard_log.hpp"
#include "app/trainer.hpp"
#include "autograd/ops/ops.hpp"
#include "core/cuda_info.hpp"
#include "core/device_properties.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"
#include "kernels/capabilities.hpp"
#include "core/philox.hpp"
#include "data/bpe_trainer.hpp"
#include "data/text.hpp"
#include "dist/process_group.hpp"
#include "models/generation.hpp"
#include "core/device_properties.hpp"
#include "models/model_family.hpp"
#include "models/pretrained.hpp"
#include "zero/checkpoint.hpp"

namespace ampgrad::app {

namespace fs = std::filesystem;

namespace {

// "a checkpoint from another preset": a --preset that disagrees with what the checkpoint was made with.
void check_preset(const std::optional<std::string>& given, const std::string& saved, const std::string& dir) {
    if (given && *given != saved)
        throw ValueError(fmt::format("checkpoint {} was trained with preset \"{}\", not \"{}\" (drop --preset, or "
                                     "train a new run)", dir, saved, *given));
}

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

// The trainer a checkpoint describes, with its weights (for sample and eval).
std::unique_ptr<Trainer> load_for_inference(const std::string& path, const std::optional<std::string>& preset) {
    const std::string dir = resolve_checkpoint(path);
    check_preset(preset, read_checkpoint_state(dir).at("run_config").at("preset").get<std::string>(), dir);
    return Trainer::resume(dir, std::nullopt, /*for_inference=*/true);
}

// The model to sample or evaluate: a checkpoint's run (--ckpt) or a Hugging Face folder (--hf).
std::unique_ptr<Trainer> load_model_for_inference(const std::string& checkpoint, const std::string& hf,
                                                  const RunConfig& hf_run, const std::optional<std::string>& preset) {
    if (checkpoint.empty() == hf.empty()) throw ValueError("give one of --ckpt (an ampgrad checkpoint) and --hf (a Hugging "
                                                           "Face model folder)");
    if (!checkpoint.empty()) return load_for_inference(checkpoint, preset);
    RunConfig cfg = hf_run;
    cfg.init_from = hf;
    return Trainer::pretrained_for_inference(cfg);
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
    const auto start = std::chrono::steady_clock::now();
    if (async && trainer.rank() == 0) async->save(trainer.checkpoint_content(), root);   // state.json's text too
    else if (!async) save_run(trainer, root, o.ckpt_node_local);
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The ZeRO line under the banner: the stage, the ranks, and this rank's model-state bytes.
std::string zero_text(const TrainStats& s, int world_size) {
    const zero::ModelStateBytes& b = s.state_bytes;
    return fmt::format("ZeRO stage {} on {} process(es): model states {:.2f} MB per rank (params {:.2f} + grads {:.2f} "
                       "+ optimizer {:.2f})", s.zero_stage, world_size, static_cast<double>(b.total()) / 1e6,
                       static_cast<double>(b.params) / 1e6, static_cast<double>(b.grads) / 1e6,
                       static_cast<double>(b.optimizer) / 1e6);
}

// MFU per token/s of a run on `world` devices (llm.c's FLOPs per token over their summed peak),
// or nullopt off the GPU or where the card's peak is unknown.
std::optional<double> mfu_per_token_per_s(const LanguageModel& lm, const std::string& device, int world) {
    if (device != "cuda") return std::nullopt;
    const std::optional<double> peak = peak_dense_bf16_flops(device_properties(Device(kCUDA, 0)).name);
    if (!peak) return std::nullopt;
    return lm.llmc_flops_per_token() / (*peak * static_cast<double>(world));
}

// The line under the banner of a data-parallel run.
std::string data_parallel_text(const RunConfig& cfg, int world_size) {
    return fmt::format("data parallel on {} processes: global batch {} ({} per rank)", world_size, cfg.batch_size,
                       cfg.batch_size / world_size);
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
        std::printf("%s\n", data_parallel_text(cfg, trainer.world_size()).c_str());
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

}  // namespace

int run_train(const TrainOptions& typed) {
    StepFile step_file;   // the step in progress, for ampgrad-run (AMPGRAD_STEP_FILE); 0: starting up
    step_file.starting(0);
    TrainOptions o = typed;
    if (o.resume == "auto") o.resume = newest_checkpoint(o.out).value_or("");   // none yet: a fresh start
    std::unique_ptr<Trainer> trainer;
    if (!o.resume.empty()) {
        const std::string dir = resolve_checkpoint(o.resume);
        const nlohmann::json saved = read_checkpoint_state(dir).at("run_config");
        check_preset(o.preset_given, saved.at("preset").get<std::string>(), dir);
        const ResumeOverrides overrides = check_resume_flags(o.run, o.flags_given, saved, dir);
        trainer = Trainer::resume(dir, o.zero_given, /*for_inference=*/false, overrides);
        if (trainer->rank() == 0)
            std::printf("resumed from %s at step %lld\n", dir.c_str(), static_cast<long long>(trainer->step()));
        if (overrides.steps) change_schedule(*trainer, *overrides.steps);
        apply_hellaswag_flags(*trainer, o.run, o.flags_given);
    } else {
        if (!o.run.init_from.empty() && o.preset_given)
            throw ValueError(fmt::format("--preset {}: --init-from {} takes the model's sizes from its config.json, so a "
                                         "preset would not be used; drop --preset", *o.preset_given, o.run.init_from));
        trainer = std::make_unique<Trainer>(o.run);
    }
    // With --zero or data parallel every process trains; only rank 0 prints and writes files.
    check_checkpoint_mode(o, *trainer);
    const bool lead = trainer->rank() == 0;
    const int world = trainer->world_size();
    if (!lead && std::freopen("/dev/null", "w", stdout) == nullptr)
        throw IOError(fmt::format("rank {}: cannot silence its standard output", trainer->rank()));
    const RunConfig& cfg = trainer->config();
    const LanguageModel& lm = trainer->model();
    fs::create_directories(o.out);
    const std::string metrics_path = (fs::path(o.out) / "metrics.jsonl").string();
    const std::string ckpt_root = (fs::path(o.out) / "checkpoints").string();
    std::optional<MetricsLog> metrics;
    if (lead) metrics.emplace(metrics_path, o.resume.empty() ? 0 : trainer->step());
    if (lead) note_restart(*metrics, trainer->step(), o.resume);   // when ampgrad-run restarted the run
    std::unique_ptr<TensorboardLog> tb = TensorboardLog::open_if_asked(o.tensorboard, *trainer);   // --tensorboard
    StepProfiler step_profiler(o.profile_steps, trainer->step(), o.out, trainer->rank());          // --profile
    print_banner(o, *trainer);
    const int64_t last = o.until > 0 ? std::min(o.until, cfg.steps) : cfg.steps;
    const bool in_place = o.progress == "line" || (o.progress == "auto" && ::isatty(STDOUT_FILENO));
    ProgressLine progress(cfg.steps, trainer->step(), in_place, o.log_every);
    const std::optional<double> mfu_factor = mfu_per_token_per_s(lm, cfg.device, world);
    if (mfu_factor) progress.set_mfu_per_token_per_s(*mfu_factor);
    if (!models::lora_layers(*lm.module()).empty()) {   // a LoRA run: what trains, on every line
        const auto [trainable, total] = models::trainable_and_total_parameters(*lm.module());
        progress.set_parameter_counts(trainable, total);
    }
    const auto start = std::chrono::steady_clock::now();
    int64_t tokens = 0;
    std::optional<EvalStats> final_eval;
    std::optional<std::string> zero_line;
    std::unique_ptr<AsyncCheckpointer> async_ckpt = o.ckpt_async ? std::make_unique<AsyncCheckpointer>() : nullptr;
    SaveBlockTimes save_blocked;
    if (async_ckpt)   // the fence: the background copy of the last save must be done before the optimizer writes
        trainer->set_before_optimizer_step([&] {
            if (const double ms = async_ckpt->wait_for_copy(); ms > 0.0) save_blocked.add_fence(ms);
        });
    std::unique_ptr<HellaswagDuringTraining> hellaswag = HellaswagDuringTraining::make(*trainer);   // --hellaswag
    if (hellaswag) std::printf("%s\n", hellaswag->describe(cfg).c_str());
    while (trainer->step() < last) {
        step_profiler.before_step(trainer->step() + 1);
        step_file.starting(trainer->step() + 1);
        TrainStats s = trainer->train_step();
        tokens += s.tokens;
        const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (s.zero_stage >= 0) {   // shown after the first step; the last step's figure closes the run
            if (!zero_line) progress.message(zero_text(s, world) + " after step " + std::to_string(s.step));
            zero_line = zero_text(s, world) + " at step " + std::to_string(s.step);
        }
        if (lead) {
            progress.update(s);
            if (!s.fp8.is_null() && !s.fp8.at("events").empty())   // --prec fp8: where it saturated or collapsed (app/fp8_run.hpp)
                progress.message(fp8_events_line(s.step, s.fp8.at("events")));
            const double tokens_per_s = elapsed > 0 ? static_cast<double>(tokens) / elapsed : 0.0;
            const std::optional<double> mfu = mfu_factor ? std::optional<double>(tokens_per_s * *mfu_factor) : std::nullopt;
            metrics->train(s, tokens_per_s, elapsed, mfu);
            if (tb) tb->train(s, tokens_per_s, mfu, *trainer);
        }
        // Every rank evaluates (no collectives in it), so that none waits past the group's timeout.
        const bool eval_now = (cfg.eval_every > 0 && s.step % cfg.eval_every == 0) || s.step == cfg.steps;
        if (eval_now) {
            final_eval = trainer->evaluate();
            if (lead) {
                metrics->eval(*final_eval);
                if (tb) tb->eval(*final_eval);
                print_eval(progress, *final_eval);
            }
        }
        if (hellaswag) hellaswag->after_step(*trainer, s.step, progress, lead ? &*metrics : nullptr);
        if (o.ckpt_every > 0 && s.step % o.ckpt_every == 0 && s.step != last)
            save_blocked.add(checkpoint_during_run(*trainer, ckpt_root, o, async_ckpt.get()));
        step_profiler.after_step(s.step);
    }
    step_profiler.finish();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (async_ckpt) async_ckpt->wait();   // the background save in flight, before the final one
    const std::string saved = save_run(*trainer, ckpt_root, o.ckpt_node_local);
    // Every rank draws the sample (the same number of forwards everywhere: stage 3 gathers in each).
    std::string sample_text;
    if (o.sample_tokens > 0 && cfg.task == "text") sample_text = trainer->sample("\n", o.sample_tokens, 0.8, 40);
    if (!lead) return 0;
    if (tb && !sample_text.empty()) tb->sample(trainer->step(), sample_text);
    progress.finish();
    std::printf("trained to step %lld in %.1f s (%.0f tokens/s); %lld skipped steps\ncheckpoint: %s\nmetrics: %s\n",
                static_cast<long long>(trainer->step()), seconds, seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0,
                static_cast<long long>(trainer->skipped_steps()), saved.c_str(), metrics_path.c_str());
    if (zero_line) std::printf("%s\n", zero_line->c_str());
    if (save_blocked.saves > 0) std::printf("%s\n", save_blocked.describe(o.ckpt_async).c_str());
    if (step_profiler.written()) std::printf("trace: %s (ampgrad trace summary; docs/profiling.md)\n", step_profiler.written()->c_str());
    if (!o.plot_dir.empty()) {
        std::vector<std::string> files = write_plots(metrics_path, o.plot_dir);
        std::printf("plots: %s\n", fmt::format("{}", fmt::join(files, ", ")).c_str());
    }
    if (final_eval)
        std::printf("final eval: train loss %.4f, val loss %.4f%s\n", final_eval->train_loss, final_eval->val_loss,
                    final_eval->exact_match ? fmt::format(", exact match {:.1f}%", 100.0 * *final_eval->exact_match).c_str()
                                            : "");
    if (o.sample_tokens > 0 && cfg.task == "text")
        std::printf("sample (temperature 0.8, top-k 40):\n----\n%s\n----\n", sample_text.c_str());
    return 0;
}

int run_sample(const SampleOptions& o) {
    std::unique_ptr<Trainer> t = load_model_for_inference(o.checkpoint, o.hf, o.hf_run, o.preset_given);
    const int64_t T = t->model().block_size();
    std::vector<int32_t> ids = t->corpus().tokenizer.encode(o.prompt.empty() ? "\n" : o.prompt);
    if (static_cast<int64_t>(ids.size()) > T)
        throw ValueError(fmt::format("--prompt: {} tokens is longer than the model's context of {} tokens",
                                     ids.size(), T));
    if (!(o.temperature >= 0.0))
        throw ValueError(fmt::format("--temperature: must be >= 0 (0: greedy), but is {}", o.temperature));
    std::fputs(o.prompt.c_str(), stdout);
    const data::Tokenizer& tok = t->corpus().tokenizer;
    const Device device = t->model().device();
    models::GenerationConfig g;
    g.max_new_tokens = o.tokens;
    g.do_sample = o.temperature > 0.0;
    g.temperature = g.do_sample ? o.temperature : 1.0;
    if (o.top_k > 0) g.top_k = o.top_k;
    if (o.top_p < 1.0) g.top_p = o.top_p;
    g.repetition_penalty = o.repetition_penalty;
    g.suppress_tokens = t->unspellable_tokens();
    const data::BpeTokenizer* bpe = tok.bpe();
    if (!o.ignore_eos && bpe != nullptr && bpe->eot_token() >= 0 && bpe->eot_token() < t->model().vocab_size())
        g.eos_token_id = bpe->eot_token();                      // as transformers' generation_config for GPT-2
    g.seed = o.seed;
    g.use_cache = !o.no_cache;
    t->model().module()->eval();
    models::generate(t->model().causal_lm(), data::token_tensor(ids, device), Tensor(), g, [&](const std::vector<int64_t>& next) {
                         std::fputs(tok.decode_one(next[0]).c_str(), stdout);
                         std::fflush(stdout);
                     });
    std::fputs("\n", stdout);
    return 0;
}

int run_eval(const EvalOptions& o) {
    std::unique_ptr<Trainer> t = load_model_for_inference(o.checkpoint, o.hf, o.hf_run, o.preset_given);
    if (!o.hellaswag.empty()) {   // multiple-choice accuracy instead of the loss (app/hellaswag_eval.hpp)
        const std::optional<int64_t> limit = o.limit > 0 ? std::optional<int64_t>(o.limit) : std::nullopt;
        const auto batches = load_hellaswag(o.hellaswag, t->corpus().tokenizer, t->model().block_size(), limit);
        std::printf("%s\n", hellaswag_text(o.hellaswag, evaluate_hellaswag(*t, batches)).c_str());
        return 0;
    }
    if (o.eval_iters_given && o.eval_iters <= 0)
        throw ValueError(fmt::format("--eval-iters {}: must be positive (batches per split; --full-split reads the "
                                     "whole validation split)", o.eval_iters));
    if (o.eval_iters_given) t->set_eval_iters(o.eval_iters);
    EvalStats e = t->evaluate(o.full_split);
    nlohmann::json j = {{"kind", "eval"}, {"step", e.step}, {"train_loss", e.train_loss}, {"val_loss", e.val_loss},
                        {"val_perplexity", std::exp(e.val_loss)}, {"protocol", e.protocol}};
    if (e.exact_match) j["exact_match"] = *e.exact_match;
    std::printf("%s\n", j.dump().c_str());
    return 0;
}

namespace {
// bench --profile N: N more steps traced into DIR/trace.json, and what tracing cost per step.
void bench_profiled_steps(Trainer& t, const BenchOptions& o, double untraced_ms) {
    std::filesystem::create_directories(o.profile_out);
    StepProfiler profiler(o.profile_steps, t.step() - 1, o.profile_out, 0);   // traces the next N steps
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < o.profile_steps; ++i) {
        const int64_t step = t.step() + 1;
        profiler.before_step(step);
        t.train_step();
        profiler.after_step(step);
    }
    profiler.finish();
    const double ms = 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
                      static_cast<double>(o.profile_steps);
    std::printf("  profiled %lld steps: %.1f ms/step traced vs %.1f untraced (%+.1f%%, writing the trace included); "
                "trace: %s\n", static_cast<long long>(o.profile_steps), ms, untraced_ms, 100.0 * (ms / untraced_ms - 1.0),
                profiler.written().value_or("(none)").c_str());
}
}  // namespace

int run_bench(const BenchOptions& o) {
    Trainer t(o.run);
    for (int64_t i = 0; i < o.warmup_steps; ++i) t.train_step();
    const auto start = std::chrono::steady_clock::now();
    int64_t tokens = 0;
    for (int64_t i = 0; i < o.timed_steps; ++i) tokens += t.train_step().tokens;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double tps = static_cast<double>(tokens) / s;
    const LanguageModel& lm = t.model();
    std::printf("bench: %s preset %s, %s on %s, batch %lld x %lld tokens, %d threads\n", lm.kind().c_str(),
                o.run.preset.c_str(), o.run.prec.c_str(), o.run.device.c_str(), static_cast<long long>(o.run.batch_size),
                static_cast<long long>(lm.block_size()), omp_get_max_threads());
    std::printf("  %.1f ms/step, %.0f tokens/s, %.2f GFLOP/s (%.3g FLOPs per token, forward + backward)\n",
                1e3 * s / static_cast<double>(o.timed_steps), tps, tps * lm.flops_per_token() / 1e9,
                lm.flops_per_token());
    if (const std::optional<double> mfu = mfu_per_token_per_s(lm, o.run.device, 1))
        std::printf("  MFU %.1f%% (llm.c's 6N + 6LCT FLOPs per token over %s's dense bf16 peak)\n", 100.0 * tps * *mfu,
                    device_properties(Device(kCUDA, 0)).name.c_str());
    if (o.profile_steps > 0) bench_profiled_steps(t, o, 1e3 * s / static_cast<double>(o.timed_steps));
    return 0;
}

namespace {

// The instruction sets the CPU kernels choose between at run time (docs/benchmarks.md names them beside
// every figure).
std::string cpu_isa_flags() {
    std::string out;
#if defined(__x86_64__) || defined(__i386__)
    const std::pair<const char*, bool> flags[] = {{"avx2", __builtin_cpu_supports("avx2")}, {"fma", __builtin_cpu_supports("fma")},
                                                  {"avx512f", __builtin_cpu_supports("avx512f")},
                                                  {"avx512_bf16", __builtin_cpu_supports("avx512bf16")}};
    for (const auto& [name, present] : flags) out += fmt::format(" {} {}", name, present ? "yes" : "no");
#endif
    return out;
}

}  // namespace

int run_info() {
    std::printf("ampgrad %s\nbuild: CUDA %s, NCCL %s, Gloo %s\n", "0.1.0", AMPGRAD_WITH_CUDA ? "yes" : "no",
                AMPGRAD_WITH_NCCL ? "yes" : "no", AMPGRAD_WITH_GLOO ? "yes" : "no");
    std::printf("devices: cpu (%d OpenMP threads; set OMP_NUM_THREADS to change)", omp_get_max_threads());
    if (AMPGRAD_WITH_CUDA) std::printf(", cuda: %d GPU(s)%s", cuda::device_count(), cuda::is_available() ? "" : " (unavailable)");
    std::printf("\ncpu: %s;%s\ncpu gemm (oneDNN %s):", device_properties(Device(kCPU)).name.c_str(), cpu_isa_flags().c_str(),
                AMPGRAD_WITH_ONEDNN ? "built in" : "not built");
    for (DType dt : {kFloat32, kBFloat16, kFloat16, kFloat64})
        std::printf(" %s: %s;", std::string(dtype_name(dt)).c_str(), gemm_route(kCPU, dt).c_str());
    std::printf("\nHugging Face architectures (--init-from, --hf): %s\n",
                fmt::format("{}", fmt::join(models::pretrained_architectures(), ", ")).c_str());
    for (const models::ModelFamily& family : models::model_families()) {   // models/model_family.hpp
        std::printf("\n");
        for (const std::string& line : family.preset_table()) std::printf("%s\n", line.c_str());
    }
    std::printf("\n%s",
                amp::policy_table_text().c_str());
    return 0;
}

int run_tokenizer_train(const TokenizerTrainOptions& o) {
    const std::string text = data::read_text_file(o.input);
    const auto start = std::chrono::steady_clock::now();
    const data::BpeTokenizer tok = data::train_bpe(text, o.vocab_size);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::error_code ec;
    fs::create_directories(o.output, ec);
    if (ec) throw IOError(fmt::format("tokenizer train: cannot create the folder \"{}\": {}", o.output, ec.message()));
    write_tokenizer_files(tok, o.output);
    const size_t n_ids = tok.encode(text, /*allow_special=*/true).size();
    std::printf("tokenizer train: %s (%zu bytes) -> %s/{vocab.json,merges.txt,tokenizer.json}: %lld tokens (%lld merges) in %.1f s; "
                "the text is %zu tokens, %.2f bytes per token\n", o.input.c_str(), text.size(), o.output.c_str(),
                static_cast<long long>(tok.vocab_size()), static_cast<long long>(tok.merge_count()), seconds, n_ids,
                n_ids > 0 ? static_cast<double>(text.size()) / static_cast<double>(n_ids) : 0.0);
    if (tok.vocab_size() < o.vocab_size)
        std::printf("  (fewer than --vocab-size %lld: no pair of tokens was left to merge)\n",
                    static_cast<long long>(o.vocab_size));
    return 0;
}

}  // namespace ampgrad::app
