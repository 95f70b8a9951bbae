// main.cpp: the `ampgrad` command: train, sample, eval, export, bench, tokenizer, data and info for every
// model family of the model table (models/model_family.hpp; docs/gpt.md, docs/llama.md). Flags are parsed with CLI11; every subcommand has --help. Errors print one line
// naming the thing and the fact, and exit with status 1 (2 for a bad command line).
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <new>

#include "app/commands.hpp"
#include "app/data_commands.hpp"
#include "app/flight_report.hpp"
#include "app/plan_command.hpp"
#include "app/profile_run.hpp"
#include "app/trace_merge.hpp"
#include "app/verify_runs.hpp"
#include "core/error.hpp"
#include "models/model_family.hpp"

using namespace ampgrad;
using namespace ampgrad::app;

namespace {

// --tokenizer (train, bench, and sample/eval --hf): the kinds app/trainer.cpp's make_tokenizer builds.
void add_tokenizer_flag(CLI::App* cmd, std::string& tokenizer) {
    // Checked by RunConfig::validate (gpt2:DIR and tiktoken:FILE carry a path).
    cmd->add_option("--tokenizer", tokenizer, "auto (the --init-from/--hf folder's vocab.json + merges.txt if it has "
                                              "them, else char), char (the text's characters), byte (V=256), gpt2 "
                                              "(GPT-2's BPE, built in), gpt2:DIR "
                                              "(a byte-level BPE: DIR/vocab.json + DIR/merges.txt) or tiktoken:FILE "
                                              "(a rank file)")
        ->capture_default_str();
}

// sample/eval --hf DIR: a Hugging Face model folder instead of a checkpoint, with the data and
// tokenizer to use (a checkpoint carries its own).
void add_hf_flags(CLI::App* cmd, std::string& hf, RunConfig& r, CLI::Option* ckpt) {
    cmd->add_option("--hf", hf, "a Hugging Face model folder (config.json + safetensors; `ampgrad info` lists "
                                "the architectures) instead of --ckpt")
        ->excludes(ckpt);
    cmd->add_option("--data", r.data_file, "--hf: the text (default: the bundled Tiny Shakespeare), or token shards");
    cmd->add_option("--val-data", r.val_data, "--hf with token shards: the validation shards");
    add_tokenizer_flag(cmd, r.tokenizer);
    cmd->add_option("--prec", r.prec, "--hf: fp32 | bf16 | fp16 (autocast)")
        ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))->capture_default_str();
    cmd->add_option("--device", r.device, "--hf: cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
    cmd->add_option("--block-size", r.block_size, "--hf: the context T of a RoPE model such as a Llama (default: its "
                                                  "max_position_embeddings; a GPT-2's is its n_positions)");
    cmd->add_option("--adapter", r.adapter, "--hf: a LoRA adapter folder (PEFT's adapter_config.json + "
                                            "adapter_model.safetensors) to apply to the model");
}

// "the model family: gpt (GPT-2 (LayerNorm, ...)), llama (...), qwen2 (...)" from the model table.
std::string model_families_help() {
    std::vector<std::string> parts;
    for (const models::ModelFamily& f : models::model_families()) parts.push_back(f.name + ": " + f.description);
    return "the model family; " + fmt::format("{}", fmt::join(parts, "; "));
}

std::string presets_help() {
    std::vector<std::string> parts;
    for (const models::ModelFamily& f : models::model_families())
        parts.push_back(fmt::format("--model {}: {} (the default {})", f.name, fmt::join(f.presets, ", "), f.presets.front()));
    return "model size (`ampgrad info` lists them); " + fmt::format("{}", fmt::join(parts, "; "));
}

// The flags that define a run (train and bench share them).
void add_run_flags(CLI::App* cmd, RunConfig& r) {
    cmd->add_option("--model", r.model, model_families_help())
        ->check(CLI::IsMember(models::model_family_names()))->capture_default_str();
    cmd->add_option("--preset", r.preset, presets_help())
        ->check(CLI::IsMember(all_preset_names()))->capture_default_str();
    cmd->add_option("--n-layer", r.n_layer, "override the preset's number of blocks L");
    cmd->add_option("--n-head", r.n_head, "override the preset's number of heads NH");
    cmd->add_option("--n-embd", r.n_embd, "override the preset's width C");
    cmd->add_option("--block-size", r.block_size, "override the preset's context length T (with --init-from a RoPE "
                                                  "model's folder: the training context, at most its max_position_embeddings)");
    cmd->add_option("--dropout", r.dropout, "dropout probability")->capture_default_str();
    cmd->add_flag("--checkpoint-blocks", r.checkpoint_blocks, "recompute each block's activations in backward");
    cmd->add_option("--task", r.task, "text (language modelling) or addition (n-digit sums)")
        ->check(CLI::IsMember({"text", "addition"}))->capture_default_str();
    cmd->add_option("--data", r.data_file, "a text file to train on (default: the bundled Tiny Shakespeare), or token "
                                           "shards in llm.c's format: a folder, a glob (\"dir/*_train_*.bin\") or a "
                                           ".bin file (ampgrad data prepare; docs/data.md)");
    cmd->add_option("--val-data", r.val_data, "token shards: the validation shards (default: the *_val_* shards beside "
                                              "--data, or its glob with train -> val)");
    add_tokenizer_flag(cmd, r.tokenizer);
    cmd->add_option("--digits", r.digits, "addition task: digits per operand")->capture_default_str();
    cmd->add_option("--steps", r.steps, "optimiser steps (the LR schedule spans them)")->capture_default_str();
    cmd->add_option("--batch-size", r.batch_size, "sequences per micro-step, all ranks together")->capture_default_str();
    cmd->add_option("--grad-accum", r.grad_accum, "gradient accumulation: micro-steps per optimiser step (tokens per "
                                                  "step = batch size x block size x this)")->capture_default_str();
    cmd->add_option("--total-batch-size", r.total_batch_size, "tokens per optimiser step (llm.c's -d): sets "
                                                              "--grad-accum to it / (batch size x block size), which "
                                                              "must divide it");
    cmd->add_option("--lr", r.lr, "peak learning rate (AdamW)")->capture_default_str();
    cmd->add_option("--min-lr", r.min_lr, "learning rate at the end of the cosine decay")->capture_default_str();
    cmd->add_option("--warmup", r.warmup, "linear warm-up steps")->capture_default_str();
    cmd->add_option("--weight-decay", r.weight_decay, "AdamW weight decay (matrices and embeddings)")->capture_default_str();
    cmd->add_option("--beta2", r.beta2, "AdamW beta2")->capture_default_str();
    cmd->add_option("--grad-clip", r.grad_clip, "clip the gradient norm to this (0: off)")->capture_default_str();
    cmd->add_option("--seed", r.seed, "seed of the initial weights, dropout and batches")->capture_default_str();
    cmd->add_option("--prec", r.prec, "fp32 | bf16 (autocast) | fp16 (autocast + GradScaler) | fp16-master "
                                      "(f16 weights, f32 masters, dynamic loss scaler) | fp8 (Linear layers in fp8)")
        ->check(CLI::IsMember({"fp32", "bf16", "fp16", "fp16-master", "fp8"}))->capture_default_str();
    cmd->add_option("--fp8-recipe", r.fp8_recipe, "--prec fp8: delayed (Transformer Engine's DelayedScaling) | "
                                                  "tensorwise | rowwise (torchao's current scaling)")
        ->check(CLI::IsMember({"delayed", "tensorwise", "rowwise"}))->capture_default_str();
    cmd->add_option("--device", r.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))->capture_default_str();
    cmd->add_option("--init-scale", r.init_scale, "fp16: the first loss scale")->capture_default_str();
    cmd->add_option("--scale-window", r.scale_window, "fp16: clean steps before the loss scale doubles")
        ->capture_default_str();
    cmd->add_option("--hysteresis", r.hysteresis, "fp16-master: overflows tolerated before the scale halves")
        ->capture_default_str();
    cmd->add_flag("--deterministic", r.deterministic, "the same bits whatever the layout (world size, ZeRO stage, "
                                                      "accumulation split, threads); needs --zero (docs/determinism.md)");
    cmd->add_option("--eval-every", r.eval_every, "evaluate every N steps (and at the end)")->capture_default_str();
    cmd->add_option("--eval-iters", r.eval_iters, "batches per evaluation")->capture_default_str();
}


// Every subcommand's options as CLI11 fills them, and the handles read after parsing.
struct CommandLine {
    TrainOptions train;
    CLI::App* train_cmd = nullptr;
    SampleOptions sample;
    std::string sample_preset;
    CLI::Option* sample_preset_opt = nullptr;
    EvalOptions eval;
    std::string eval_preset;
    CLI::Option* eval_preset_opt = nullptr;
    CLI::Option* eval_iters_opt = nullptr;
    ExportOptions export_opts;
    BenchOptions bench;
    CLI::App* bench_cmd = nullptr;
    TokenizerTrainOptions tok_train;
    DataPrepareOptions prep;
    std::string trace_file;       // trace summary FILE
    int64_t trace_top = 30;
    bool trace_by_shape = false;  // trace summary --group-by-input-shape
    std::vector<std::string> trace_inputs;   // trace merge FILE|DIR... --out FILE
    std::string trace_out = "trace.merged.json";
    CLI::App* trace_merge_cmd = nullptr;
    std::string verify_a, verify_b;   // verify RUN_A RUN_B
    std::string fr_dir;           // fr DIR
    PlanOptions plan;             // plan: train's flags + --world-size
    CLI::App* plan_cmd = nullptr;
};

void add_train_command(CLI::App& app, CommandLine& c) {
    c.train_cmd = app.add_subcommand("train", "train a language model of any family (--model; progress line, metrics.jsonl, checkpoints)");
    add_run_flags(c.train_cmd, c.train.run);
    c.train_cmd->add_option("--out", c.train.out, "output folder: metrics.jsonl, checkpoints/")->capture_default_str();
    c.train_cmd->add_option("--resume", c.train.resume, "continue the run saved in this checkpoint (or output) folder; auto: the newest "
                                                         "checkpoint under --out, or a fresh start when there is none");
    c.train_cmd->add_option("--init-from", c.train.run.init_from, "start from the weights of this Hugging Face model folder (GPT-2, "
                                                             "Llama, Mistral, Qwen2, ...: it sets --model and the sizes; docs/pretrained.md)");
    c.train_cmd->add_option("--lora", c.train.run.lora, "with --init-from: train LoRA adapters on the frozen model, "
                                                         "e.g. r=16,alpha=32,dropout=0.05,targets=q_proj,v_proj (also "
                                                         "rslora, init=gaussian, bias=, save=lm_head; docs/lora.md)");
    c.train_cmd->add_flag("--qlora", c.train.run.qlora, "--lora on an NF4-quantised base (QLoRA: every Linear but lm_head in 4 bits, docs/nf4.md)");
    c.train_cmd->add_option("--plot", c.train.plot_dir, "write PNG curves (loss, loss scale, grad norm, lr) here");
    c.train_cmd->add_option("--until", c.train.until, "stop after this step, with a checkpoint (the schedule still "
                                                  "spans --steps)");
    c.train_cmd->add_option("--ckpt-every", c.train.ckpt_every, "also save a checkpoint every N steps")->capture_default_str();
    c.train_cmd->add_option("--log-every", c.train.log_every, "progress every N steps when not on a terminal")
        ->capture_default_str();
    c.train_cmd->add_option("--tensorboard", c.train.tensorboard.dir, "also write TensorBoard event files into this folder "
                                                                  "(tags: docs/profiling.md)");
    c.train_cmd->add_option("--tensorboard-hist-every", c.train.tensorboard.hist_every, "--tensorboard: histograms of "
                                                                  "the weights and gradients every N steps (0: none)")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    c.train_cmd->add_option("--profile", c.train.profile_steps, "write OUT/trace.json, a Chrome trace (Perfetto) of N steps "
                                                           "after one warm-up step (docs/profiling.md)")
        ->check(CLI::NonNegativeNumber);
    c.train_cmd->add_option("--sample-tokens", c.train.sample_tokens, "print a sample of N tokens at the end (0: none)")
        ->capture_default_str();
    c.train_cmd->add_option("--zero", c.train.run.zero, "train with the ZeRO engine at this stage on every process "
                                                    "ampgrad-run starts (0: data parallel, nothing partitioned; 1: "
                                                    "optimizer states, 2: + gradients, 3: + parameters partitioned); "
                                                    "without --zero: no engine")
        ->check(CLI::Range(0, 3));
    c.train_cmd->add_flag("--ckpt-async", c.train.ckpt_async, "write the --ckpt-every checkpoints on a background "
                                                          "thread from a copy in host memory; the step waits only "
                                                          "for the copy (not with --zero)");
    c.train_cmd->add_flag("--ckpt-node-local", c.train.ckpt_node_local, "--zero: checkpoints on each host's own disk "
                                                                    "(each host writes its ranks' files and a manifest)");
    c.train_cmd->add_option("--hellaswag", c.train.run.hellaswag, "a jsonl file in HellaSwag's layout: multiple-choice "
                                                              "accuracy every --hellaswag-every steps and at the end "
                                                              "(docs/data.md)");
    c.train_cmd->add_option("--hellaswag-every", c.train.run.hellaswag_every, "--hellaswag every N steps (0: only at the end)")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    c.train_cmd->add_option("--hellaswag-limit", c.train.run.hellaswag_limit, "--hellaswag: the first N examples (0: all)")
        ->check(CLI::NonNegativeNumber)->capture_default_str();
    c.train_cmd->add_option("--progress", c.train.progress, "auto (in place on a terminal), line, plain")
        ->check(CLI::IsMember({"auto", "line", "plain"}))->capture_default_str();

}

void add_sample_command(CLI::App& app, CommandLine& c) {
    CLI::App* sample_cmd = app.add_subcommand("sample", "stream text from a checkpoint");
    CLI::Option* sample_ckpt = sample_cmd->add_option("--ckpt", c.sample.checkpoint, "checkpoint (or training output) folder");
    add_hf_flags(sample_cmd, c.sample.hf, c.sample.hf_run, sample_ckpt);
    sample_cmd->add_option("--prompt", c.sample.prompt, "text to continue");
    sample_cmd->add_option("--tokens,--max-new-tokens", c.sample.tokens, "tokens to generate")->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    sample_cmd->add_option("--temperature", c.sample.temperature, "softmax temperature (0: greedy)")->capture_default_str();
    sample_cmd->add_option("--top-k", c.sample.top_k, "sample among the k most likely tokens (0: all)")->capture_default_str();
    sample_cmd->add_option("--top-p", c.sample.top_p, "nucleus sampling: the most likely tokens of this total "
                                                     "probability (1: all)")->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    sample_cmd->add_option("--repetition-penalty", c.sample.repetition_penalty,
                           "divide (multiply if negative) the logits of tokens already present (1: off)")
        ->capture_default_str()->check(CLI::PositiveNumber);
    sample_cmd->add_flag("--no-cache", c.sample.no_cache, "recompute the whole context for every token (no KV cache)");
    sample_cmd->add_flag("--ignore-eos", c.sample.ignore_eos, "do not stop at the tokenizer's <|endoftext|> (a BPE "
                                                            "tokenizer's end token stops the sample by default)");
    sample_cmd->add_option("--seed", c.sample.seed, "sampling seed")->capture_default_str();
    c.sample_preset_opt = sample_cmd->add_option("--preset", c.sample_preset, "expected preset (checked)");

}

void add_eval_command(CLI::App& app, CommandLine& c) {
    CLI::App* eval_cmd = app.add_subcommand("eval", "loss on the train and validation splits (exact match for addition)");
    CLI::Option* eval_ckpt = eval_cmd->add_option("--ckpt", c.eval.checkpoint, "checkpoint (or training output) folder");
    add_hf_flags(eval_cmd, c.eval.hf, c.eval.hf_run, eval_ckpt);
    eval_cmd->add_option("--batch-size", c.eval.hf_run.batch_size, "--hf: sequences per batch")->capture_default_str();
    c.eval_iters_opt = eval_cmd->add_option("--eval-iters", c.eval.eval_iters, "batches per split for the "
                                                       "estimate (default: the run's; --hf: 20)");
    eval_cmd->add_flag("--full-split", c.eval.full_split, "the validation loss over every non-overlapping window of the "
                                                        "validation split (the figure people quote), not an estimate");
    CLI::Option* eval_hellaswag = eval_cmd->add_option("--hellaswag", c.eval.hellaswag, "a jsonl file in HellaSwag's layout: "
                                                       "acc and acc_norm of the model on it instead of the loss (docs/data.md)");
    eval_cmd->add_option("--limit", c.eval.limit, "--hellaswag: the first N examples (0: all)")
        ->check(CLI::NonNegativeNumber)->needs(eval_hellaswag);
    c.eval_preset_opt = eval_cmd->add_option("--preset", c.eval_preset, "expected preset (checked)");

}

// ampgrad plan: train's run flags, plus the ranks to plan for (app/plan_command.hpp).
void add_plan_command(CLI::App& app, CommandLine& c) {
    c.plan_cmd = app.add_subcommand("plan", "the bytes per rank a training run will need, term by term, before it runs "
                                            "(docs/profiling.md)");
    RunConfig& r = c.plan.request.run;
    add_run_flags(c.plan_cmd, r);
    c.plan_cmd->add_option("--zero", r.zero, "the ZeRO stage to plan for (0-3; -1: none)")->capture_default_str();
    c.plan_cmd->add_option("--world-size", c.plan.request.world_size, "ranks to plan for (--batch-size is all ranks')")
        ->capture_default_str()->check(CLI::PositiveNumber);
    c.plan_cmd->add_option("--vocab-size", c.plan.request.vocab_size, "the model's V (default: the preset's)");
    c.plan_cmd->add_flag("--json", c.plan.json, "print the plan as one JSON object");
}

// export, bench, info and tokenizer train (and plan).
void add_tool_commands(CLI::App& app, CommandLine& c) {
    add_plan_command(app, c);
    CLI::App* export_cmd = app.add_subcommand("export", "write a checkpoint's model as a Hugging Face folder "
                                                        "(its family's architecture: GPT2LMHeadModel, LlamaForCausalLM, ...), written whole");
    export_cmd->add_option("--ckpt", c.export_opts.checkpoint, "checkpoint (or training output) folder")->required();
    export_cmd->add_option("--hf", c.export_opts.hf_out, "the folder to write (config.json, model.safetensors; a --lora "
                                                        "run: the PEFT adapter folder)")->required();
    export_cmd->add_flag("--merge-lora", c.export_opts.merge_lora, "a --lora run: fold the adapters into the weights and "
                                                                   "write a plain model folder instead of the adapter");

    c.bench_cmd = app.add_subcommand("bench", "time training steps: ms/step, tokens/s, GFLOP/s");
    add_run_flags(c.bench_cmd, c.bench.run);
    c.bench_cmd->add_option("--warmup-steps", c.bench.warmup_steps, "untimed steps first")->capture_default_str();
    c.bench_cmd->add_option("--timed-steps", c.bench.timed_steps, "timed steps")->capture_default_str();
    c.bench_cmd->add_option("--profile", c.bench.profile_steps, "then trace N more steps into --profile-out/trace.json "
                                                                "and report what tracing cost (docs/profiling.md)")
        ->capture_default_str()->check(CLI::NonNegativeNumber);
    c.bench_cmd->add_option("--profile-out", c.bench.profile_out, "folder for bench --profile's trace.json")
        ->capture_default_str();

    app.add_subcommand("info", "build (CUDA, Gloo, NCCL), devices, threads, presets, the autocast policy table");

    CLI::App* tok_cmd = app.add_subcommand("tokenizer", "byte-level BPE tokenizers (docs/tokenizers.md)");
    tok_cmd->require_subcommand(1);
    CLI::App* tok_train_cmd = tok_cmd->add_subcommand("train", "learn a byte-level BPE from a text; write vocab.json + "
                                                               "merges.txt + tokenizer.json (load with --tokenizer gpt2:DIR, or in HF tokenizers)");
    tok_train_cmd->add_option("--input", c.tok_train.input, "the text to learn from (UTF-8)")->required();
    tok_train_cmd->add_option("--output", c.tok_train.output, "folder for vocab.json, merges.txt and tokenizer.json")->required();
    tok_train_cmd->add_option("--vocab-size", c.tok_train.vocab_size, "tokens: 256 bytes + merges + <|endoftext|>")
        ->required()->check(CLI::Range(int64_t{257}, int64_t{INT32_MAX}));

}

void add_data_command(CLI::App& app, CommandLine& c) {
    CLI::App* data_cmd = app.add_subcommand("data", "token shards in llm.c's format (docs/data.md)");
    data_cmd->require_subcommand(1);
    CLI::App* prep_cmd = data_cmd->add_subcommand("prepare", "text files, folders or .jsonl into llm.c token shards + meta.json");
    prep_cmd->add_option("--input", c.prep.inputs, "files or folders (every file under it, sorted); a .jsonl file is a "
                                                 "document per line (its \"text\"), any other file one document")
        ->required()->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    prep_cmd->add_option("--tokenizer", c.prep.tokenizer, "gpt2 (built in), byte, char, DIR or gpt2:DIR (vocab.json + "
                                                        "merges.txt), tiktoken:FILE")->required();
    prep_cmd->add_option("--output", c.prep.output, "the shards' folder (NAME_val_000000.bin, NAME_train_000001.bin, ..., "
                                                  "meta.json)")->required();
    prep_cmd->add_option("--name", c.prep.name, "the shards' name prefix (default: the output folder's name)");
    prep_cmd->add_option("--shard-tokens", c.prep.shard_tokens, "tokens per shard")->capture_default_str()
        ->check(CLI::Range(int64_t{1}, int64_t{INT32_MAX}));
    prep_cmd->add_option("--val-tokens", c.prep.val_tokens, "the validation shard holds the first N tokens (0: a whole shard)")
        ->capture_default_str()->check(CLI::Range(int64_t{0}, int64_t{INT32_MAX}));
    prep_cmd->add_option("--threads", c.prep.threads, "encoding threads (0: one per core)")->capture_default_str()
        ->check(CLI::Range(0, 4096));
    prep_cmd->add_flag("--overwrite", c.prep.overwrite, "replace shards made from other inputs or settings");
    prep_cmd->add_option("--progress", c.prep.progress, "auto (in place on a terminal), line, plain")
        ->check(CLI::IsMember({"auto", "line", "plain"}))->capture_default_str();

}

// The parsed subcommand, run (flags typed are recorded where a command checks them).
int run_command(CommandLine& c, const std::string& command) {
    if (command == "train") {
        c.train.run.settle_model(c.train_cmd->count("--model") > 0, c.train_cmd->count("--preset") > 0);
        if (c.train_cmd->count("--preset") > 0) c.train.preset_given = c.train.run.preset;
        if (c.train_cmd->count("--zero") > 0) c.train.zero_given = c.train.run.zero;
        for (const CLI::Option* opt : c.train_cmd->get_options())
            if (opt->count() > 0) c.train.flags_given.push_back(opt->get_name());
        if (c.train_cmd->count("--out") == 0) c.train.out = "runs/" + c.train.run.preset;
        return run_train(c.train);
    }
    if (command == "sample") {
        if (c.sample_preset_opt->count() > 0) c.sample.preset_given = c.sample_preset;
        return run_sample(c.sample);
    }
    if (command == "eval") {
        if (c.eval_preset_opt->count() > 0) c.eval.preset_given = c.eval_preset;
        c.eval.eval_iters_given = c.eval_iters_opt->count() > 0;
        return run_eval(c.eval);
    }
    if (command == "export") return run_export(c.export_opts);
    if (command == "bench") {
        c.bench.run.settle_model(c.bench_cmd->count("--model") > 0, c.bench_cmd->count("--preset") > 0);
        return run_bench(c.bench);
    }
    if (command == "plan") {
        c.plan.request.run.settle_model(c.plan_cmd->count("--model") > 0, c.plan_cmd->count("--preset") > 0);
        return run_plan(c.plan);
    }
    if (command == "tokenizer") return run_tokenizer_train(c.tok_train);
    if (command == "data") return run_data_prepare(c.prep);
    if (command == "trace" && c.trace_merge_cmd->parsed()) return run_trace_merge(c.trace_inputs, c.trace_out);
    if (command == "trace") return run_trace_summary(c.trace_file, c.trace_top, c.trace_by_shape);
    if (command == "verify") return run_verify(c.verify_a, c.verify_b);
    if (command == "fr") return run_flight_report(c.fr_dir);
    return run_info();
}

// Commands that read what runs left behind: traces, two runs' bits, flight recorder dumps.
void add_inspection_commands(CLI::App& app, CommandLine& c) {
    CLI::App* trace_cmd = app.add_subcommand("trace", "Chrome traces written by train --profile (docs/profiling.md)");
    trace_cmd->require_subcommand(1);
    CLI::App* summary_cmd = trace_cmd->add_subcommand("summary", "the spans of a trace by self time (torch's key_averages)");
    summary_cmd->add_option("file", c.trace_file, "trace.json")->required();
    summary_cmd->add_option("--top", c.trace_top, "rows to print")->capture_default_str()->check(CLI::PositiveNumber);
    summary_cmd->add_flag("--group-by-input-shape", c.trace_by_shape,
                          "a row per kernel and operand shapes, with its GFLOP/s (torch's key_averages(group_by_input_shape=True))");
    c.trace_merge_cmd = trace_cmd->add_subcommand("merge", "join the ranks' traces (OUT/trace.json, OUT/trace.rank<R>.json) "
                                                           "into one file: one process track per rank");
    c.trace_merge_cmd->add_option("inputs", c.trace_inputs, "trace files, or a run's output folder")->required()
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    c.trace_merge_cmd->add_option("--out", c.trace_out, "the merged trace")->capture_default_str();
    CLI::App* verify_cmd = app.add_subcommand("verify", "do two runs hold the same bits? names the first step and tensor "
                                              "where their metrics or checkpoints differ, in ulps (docs/determinism.md); "
                                              "exit 0 identical, 1 different, 2 error");
    verify_cmd->add_option("run_a", c.verify_a, "a run's output folder (or its checkpoints folder)")->required();
    verify_cmd->add_option("run_b", c.verify_b, "the run to compare with it")->required();
    app.add_subcommand("fr", "name the rank and the collective where a hung run's ranks disagree, from their flight "
                             "recorder dumps (docs/distributed.md)")->add_option("dir", c.fr_dir,
                             "the folder of flight_recorder_rank<R>.json files (AMPGRAD_FR_DIR)")->required();
}

}  // namespace

int main(int argc, char** argv) {
    std::signal(SIGXFSZ, SIG_IGN);   // a file-size limit makes write() fail with EFBIG instead of killing us
    CLI::App app{"ampgrad: train, evaluate, sample and export language models: GPT-2, Llama, Qwen2 and any family of the "
                 "model table (docs/gpt.md, docs/llama.md, docs/architecture.md)"};
    app.require_subcommand(1);
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);   // a repeated flag: the last wins
    CommandLine c;
    add_train_command(app, c);
    add_sample_command(app, c);
    add_eval_command(app, c);
    add_tool_commands(app, c);
    add_data_command(app, c);
    add_inspection_commands(app, c);
    CLI11_PARSE(app, argc, argv);
    const std::string command = app.get_subcommands().front()->get_name();
    try {
        return run_command(c, command);
    } catch (const std::exception& e) {
        std::fflush(stdout);
        // A container of the library's that the host could not grow (tensors raise OutOfMemoryError themselves).
        const bool host_oom = dynamic_cast<const std::bad_alloc*>(&e) != nullptr;
        std::fprintf(stderr, "\nampgrad %s: error: %s%s\n", command.c_str(), host_oom ? "out of host memory: " : "",
                     e.what());
        return command == "verify" ? 2 : 1;   // verify's 1 means "different"
    }
}
