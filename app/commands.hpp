// commands.hpp: the subcommands of the `ampgrad` program (app/main.cpp parses the flags).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "app/run_config.hpp"
#include "app/tensorboard_flags.hpp"

namespace ampgrad::app {

struct TrainOptions {
    RunConfig run;
    std::string out = "runs/nano";       // metrics.jsonl, checkpoints/, plots
    std::string resume;                  // a checkpoint directory (or a run's OUT) to continue
    std::string plot_dir;                // --plot DIR: PNG curves at the end (and at each eval)
    int64_t until = 0;                   // stop after this step (0: --steps), saving a checkpoint
    int64_t ckpt_every = 0;              // also checkpoint every N steps (0: only at the end)
    int64_t log_every = 10;              // plain-line progress every N steps (not a terminal)
    int64_t sample_tokens = 300;         // a sample at the end (0: none)
    std::string progress = "auto";       // auto | line | plain
    TensorboardFlags tensorboard;        // --tensorboard DIR, --tensorboard-hist-every N (app/tensorboard_log.hpp)
    int64_t profile_steps = 0;           // --profile N: a Chrome trace of N steps (app/profile_run.hpp)
    bool ckpt_node_local = false;        // --zero: each host saves its ranks' files on its own disk
    bool ckpt_async = false;             // --ckpt-every saves written in the background (app/async_checkpoint.hpp)
    std::optional<std::string> preset_given;   // --preset as typed (checked against a checkpoint)
    std::optional<int64_t> zero_given;         // --zero as typed (with --resume: the stage to continue at)
    std::vector<std::string> flags_given;      // every flag typed (with --resume: checked, app/resume_flags.hpp)
};
int run_train(const TrainOptions& o);

// sample and eval read an ampgrad checkpoint (--ckpt) or a Hugging Face GPT-2/Llama/Mistral folder (--hf, with
// the data and tokenizer of `hf_run`: --data, --tokenizer, --batch-size, --eval-iters, --prec).
struct SampleOptions {
    std::string checkpoint, hf, prompt;
    RunConfig hf_run;
    int64_t tokens = 500;                // --tokens or --max-new-tokens
    double temperature = 0.8;            // 0: greedy
    int64_t top_k = 40;                  // 0: no top-k
    double top_p = 1.0;                  // 1: no nucleus filter
    double repetition_penalty = 1.0;     // 1: none
    bool no_cache = false;               // rerun the whole context per token (the pre-KV-cache loop)
    bool ignore_eos = false;             // keep going past a BPE tokenizer's <|endoftext|> (default: stop there)
    uint64_t seed = 1;
    std::optional<std::string> preset_given;
};
int run_sample(const SampleOptions& o);

struct EvalOptions {
    std::string checkpoint, hf;
    RunConfig hf_run;
    int64_t eval_iters = 0;              // batches per split (when eval_iters_given; else the run's own)
    bool eval_iters_given = false;
    bool full_split = false;             // every window of the validation split
    std::string hellaswag;               // --hellaswag FILE: multiple-choice accuracy instead of the loss
    int64_t limit = 0;                   // --limit: the first N examples of FILE (0: all)
    std::optional<std::string> preset_given;
};
int run_eval(const EvalOptions& o);

// `ampgrad export --ckpt DIR --hf OUT`: a checkpoint's model as a Hugging Face folder (app/export_hf.hpp).
struct ExportOptions {
    std::string checkpoint, hf_out;
    bool merge_lora = false;   // a --lora run: the merged model instead of the adapter folder
};
int run_export(const ExportOptions& o);

struct BenchOptions {
    RunConfig run;
    int64_t warmup_steps = 3, timed_steps = 10;
    int64_t profile_steps = 0;       // --profile N: trace N more steps after the timed ones (app/profile_run.hpp)
    std::string profile_out = ".";   // --profile-out DIR: where trace.json goes
};
int run_bench(const BenchOptions& o);

int run_info();

// `ampgrad tokenizer train`: a byte-level BPE learnt from a text (data/bpe_trainer.hpp), written as
// vocab.json + merges.txt (and the same as one tokenizer.json) into `output` (created if needed;
// each file written atomically).
struct TokenizerTrainOptions {
    std::string input, output;
    int64_t vocab_size = 0;
};
int run_tokenizer_train(const TokenizerTrainOptions& o);

}  // namespace ampgrad::app
