// commands.cpp: sample, eval, bench, info and tokenizer train (app/commands.hpp); train is in
// train_command.cpp.
#include "app/commands.hpp"

#include <omp.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "amp/autocast_policy.hpp"
#include "ampgrad_config.h"
#include "app/checkpoint.hpp"
#include "app/export_hf.hpp"
#include "app/hellaswag_eval.hpp"
#include "app/profile_run.hpp"
#include "app/report.hpp"
#include "app/trainer.hpp"
#include "autograd/ops/ops.hpp"
#include "core/atomic_file.hpp"
#include "core/cuda_info.hpp"
#include "core/device_properties.hpp"
#include "core/error.hpp"
#include "kernels/capabilities.hpp"
#include "data/bpe_trainer.hpp"
#include "data/text.hpp"
#include "dist/process_group.hpp"
#include "models/generation.hpp"
#include "models/pretrained.hpp"

namespace ampgrad::app {

namespace fs = std::filesystem;

namespace {

// The trainer a checkpoint describes, with its weights (for sample and eval).
std::unique_ptr<Trainer> load_for_inference(const std::string& path, const std::optional<std::string>& preset) {
    const std::string dir = resolve_checkpoint(path);
    check_checkpoint_preset(preset, read_checkpoint_state(dir).at("run_config").at("preset").get<std::string>(), dir);
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

}  // namespace

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
    ampgrad::create_directories(o.profile_out, "--profile");
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
