// report.hpp: what a training run shows and leaves behind:
//   ProgressLine  one line that updates in place on a terminal (\r), plain lines otherwise:
//                 step/total, loss, tokens/s, learning rate, loss scale, skipped steps, gradient
//                 norm, with --zero the stage and the model-state bytes per rank, with several
//                 processes their number and the global batch, on a GPU whose peak is known the
//                 MFU (models/gpt_mfu.hpp), and ETA.
//   MetricsLog    OUT/metrics.jsonl: one JSON object per step ("kind": "train") and per
//                 evaluation ("kind": "eval"; with --zero also zero_stage, model_state_bytes_per_rank;
//                 with several processes world_size and global_batch);
//                 a resumed run first drops records after its step.
//   write_plots   PNG curves drawn by gnuplot from metrics.jsonl (app/report.cpp explains each).
#pragma once
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>

#include "app/trainer.hpp"

namespace ampgrad::app {

// MFU per token/s of a run on `world` devices (llm.c's FLOPs per token over their summed peak),
// or nullopt off the GPU or where the card's peak is unknown.
std::optional<double> mfu_per_token_per_s(const LanguageModel& lm, const std::string& device, int world);

class ProgressLine {
public:
    // in_place: rewrite one line (a terminal); else print every `every` steps.
    ProgressLine(int64_t total_steps, int64_t first_step, bool in_place, int64_t every);
    void update(const TrainStats& s);
    // MFU = tokens/s * mfu_per_token_per_s: llm.c's FLOPs per token over the peak FLOP/s of every
    // device the run uses. Unset (the default, and on a CPU): no MFU is shown.
    void set_mfu_per_token_per_s(double factor) { mfu_per_token_per_s_ = factor; }
    // A run that trains part of its model (LoRA adapters): each line also shows "trains T of N params".
    void set_parameter_counts(int64_t trainable, int64_t total) { parameter_counts_ = {trainable, total}; }
    void message(const std::string& line);   // a plain line (an eval record), keeping the progress line below
    void finish();                           // ends an in-place line with a newline

private:
    std::string format(const TrainStats& s);
    int64_t total_, first_step_, every_;
    bool in_place_;
    bool line_open_ = false;
    std::chrono::steady_clock::time_point start_, last_draw_;
    double tokens_per_s_ = 0.0;
    std::optional<double> mfu_per_token_per_s_;
    std::optional<std::pair<int64_t, int64_t>> parameter_counts_;   // (trainable, total)
    int64_t tokens_since_ = 0;
    std::chrono::steady_clock::time_point since_;
};

class MetricsLog {
public:
    // Opens path for appending; when resume_step >= 0, first rewrites it without the records of
    // steps after resume_step (they belong to the run's lost future).
    MetricsLog(const std::string& path, int64_t resume_step = -1);
    // mfu: written as "mfu" when known (a GPU with a known peak), else left out.
    void train(const TrainStats& s, double tokens_per_s, double elapsed_s, std::optional<double> mfu = std::nullopt);
    void eval(const EvalStats& e);
    void record(const nlohmann::json& j);   // any other record ("kind": "hellaswag", app/hellaswag_eval.hpp)

private:
    void write(const std::string& line);
    std::string path_;
    std::ofstream out_;
};

// Draws loss.png (train and eval loss), scale.png (loss scale on a log axis, skipped steps
// marked), grad_norm.png and lr.png into `dir` from the JSONL file. Returns the files written,
// or throws IOError naming gnuplot's failure (not installed, or an error exit).
std::vector<std::string> write_plots(const std::string& metrics_path, const std::string& dir);

}  // namespace ampgrad::app
