// trainer.hpp: one training run of `ampgrad train`: the data (a text and its tokenizer, or the
// addition task), the batch sampler, the model (any family), the precision recipe and the learning-rate schedule,
// stepped one optimiser step at a time. The training loop's own state (step, sampler position,
// RNG, scaler, optimiser) is exactly what a checkpoint saves (app/checkpoint.hpp).
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/auto_restart.hpp"
#include "app/corpus.hpp"
#include "app/language_model.hpp"
#include "app/precision.hpp"
#include "app/resume_flags.hpp"
#include "app/run_config.hpp"
#include "app/shard_data.hpp"
#include "app/zero_training.hpp"
#include "data/addition.hpp"
#include "data/sampler.hpp"
#include "data/tokenizer.hpp"
#include "dist/ddp.hpp"
#include "models/gpt.hpp"

namespace ampgrad::app {

struct CheckpointContent;   // app/checkpoint.hpp

struct TrainStats {
    int64_t step = 0;
    double loss = 0.0, lr = 0.0, grad_norm = 0.0, scale = 1.0;
    bool skipped = false;
    int64_t skipped_total = 0;
    int64_t tokens = 0;   // tokens in this step's batch (every rank's and micro-batch's)
    int64_t grad_accum = 1;   // micro-batches per step (--grad-accum)
    double data_seconds = 0.0;   // spent fetching this step's batches (all micro-batches, this rank)
    int world_size = 1;   // processes training together (data parallel or --zero)
    int64_t global_batch = 0;   // sequences per step, all ranks together
    int zero_stage = -1;  // --zero: the stage (-1 without), and this rank's model-state bytes
    zero::ModelStateBytes state_bytes;
    int64_t peak_bytes = 0;   // the device allocator's high-water mark so far, this rank (`ampgrad plan` predicts it)
    nlohmann::json fp8;   // --prec fp8: {"events": [...], "layers": {...}} (app/fp8_run.hpp); null otherwise
};

struct EvalStats {
    int64_t step = 0;
    double train_loss = 0.0, val_loss = 0.0;
    // What the losses are: "estimate: 20 batches of 32 windows" or "full split: 1234 windows".
    std::string protocol;
    std::optional<double> exact_match;   // addition task only
};

// WORLD_SIZE as ampgrad-run (or torchrun, or Slurm's SLURM_NTASKS) sets it; 1 when unset.
int launched_world_size();

class Trainer {
public:
    // A fresh run: manual_seed(cfg.seed), then the model's initial weights. Under a launcher
    // (launched_world_size() > 1) without --zero, the run is data parallel: a process group, the
    // model wrapped in dist::DistributedDataParallel, each rank on its own share of --batch-size.
    explicit Trainer(const RunConfig& cfg);
    // Rebuilds the run saved in checkpoint directory `dir` and continues from its step. A ZeRO
    // checkpoint (--zero) is loaded by every rank at the current world size (resharded), at the
    // stage `zero_stage` names if given (0, 1, 2, 3), else the saved one. for_inference: one process,
    // no engine: a ZeRO checkpoint's parameters are read consolidated (sample, eval).
    // layout: --batch-size and --grad-accum of a --deterministic run resumed at another world size.
    static std::unique_ptr<Trainer> resume(const std::string& dir, std::optional<int64_t> zero_stage = std::nullopt,
                                           bool for_inference = false, const ResumeOverrides& layout = {});
    // `ampgrad sample/eval --hf DIR`: one process, no engine, the model and weights of the Hugging Face
    // folder cfg.init_from, the data and tokenizer cfg names (for eval's splits and the encoding).
    static std::unique_ptr<Trainer> pretrained_for_inference(const RunConfig& cfg);

    TrainStats train_step();   // one optimiser step; step() counts them
    // `hook` runs in each train_step right before the optimizer step, the step's first write of the
    // parameters and optimizer states (the forward and backward only read them): --ckpt-async's
    // fence (AsyncCheckpointer::wait_for_copy, app/async_checkpoint.hpp).
    void set_before_optimizer_step(std::function<void()> hook) { before_optimizer_step_ = std::move(hook); }
    // Mean loss over eval_iters fixed batches of each split (eval mode); full_split: the validation
    // loss over every non-overlapping window of the validation split (the train loss stays an estimate).
    EvalStats evaluate(bool full_split = false);
    std::string sample(const std::string& prompt, int64_t tokens, double temperature, std::optional<int64_t> top_k);
    // The model's token ids the tokenizer cannot spell (a pretrained model's vocabulary beyond a
    // byte or char tokenizer's): generation suppresses them.
    std::vector<int64_t> unspellable_tokens() const;
    void save(const std::string& dir) const;   // a checkpoint (app/checkpoint.hpp)
    CheckpointContent checkpoint_content() const;   // what save writes: views of the live state
    // --zero: a ZeRO checkpoint root/step-N (zero/checkpoint.hpp) with state.json; every rank calls it.
    // node_local: each host's first rank writes a folder on its own disk (zero::SaveOptions::node_local).
    std::string save_zero(const std::string& root, int keep = 2, bool node_local = false) const;
    nlohmann::json state_json() const;          // state.json's content

    double lr_at(int64_t step) const;   // warm-up + cosine, nanoGPT's get_lr
    // --resume --steps N: the run now ends at step N, and the cosine decay (lr_at) spans N steps;
    // ValueError naming --steps when N is below the step the run is at.
    void set_steps(int64_t steps);
    int64_t step() const { return step_; }
    uint64_t data_position() const { return data_position_; }   // token shards: windows consumed
    void set_eval_iters(int64_t n) { cfg_.eval_iters = n; }
    // --resume with --hellaswag flags (app/hellaswag_eval.hpp): what is measured may change.
    void set_hellaswag(std::string file, int64_t every, int64_t limit) {
        cfg_.hellaswag = std::move(file), cfg_.hellaswag_every = every, cfg_.hellaswag_limit = limit;
    }
    const RunConfig& config() const { return cfg_; }
    LanguageModel& model() { return *model_; }   // the run's model (--model: any family)
    const LanguageModel& model() const { return *model_; }
    const Corpus& corpus() const { return corpus_; }
    Precision& precision() { return *precision_; }   // not with --zero
    ZeroTraining* zero() { return zero_.get(); }      // null without --zero
    bool data_parallel() const { return ddp_ != nullptr; }
    int rank() const { return rank_; }                // 0 on one process
    int world_size() const { return world_size_; }    // 1 on one process
    const StepLayout& layout() const { return layout_; }   // this rank's micro-batch and accumulation
    int64_t skipped_steps() const { return zero_ ? zero_->skipped_steps() : precision_->skipped_steps(); }

private:
    // resume's work; resume adds the checkpoint to every error of it.
    static std::unique_ptr<Trainer> resume_from(const std::string& dir, std::optional<int64_t> zero_stage,
                                                bool for_inference, const ResumeOverrides& layout);
    // training: false for sample and eval (one process, never distributed).
    Trainer(const RunConfig& cfg, const std::optional<data::Tokenizer>& tokenizer, bool training);
    void join_process_group();
    RunConfig layout_config() const;                 // cfg_ with this world size's micro-batches (layout_)
    void adopt_pretrained_sizes();                   // --init-from: cfg_ takes config.json's model and sizes
    void restore_rank_streams(const nlohmann::json& state);
    void restore_data_position(const nlohmann::json& state);
    void restore_zero_fp8(const std::string& dir);           // --zero --prec fp8: fp8.safetensors, when the save has it
    void restore_ddp_buckets(const nlohmann::json& state);   // data parallel: the saved run's learned buckets
    std::pair<Tensor, Tensor> next_batch(int64_t micro);     // micro-batch `micro` of this step, this rank's share
    void key_streams(int64_t global_micro);                  // --deterministic (app/deterministic_run.hpp)
    Tensor loss_on(const Tensor& x, const Tensor& y);
    void backward_micro(const Tensor& loss, bool last);
    int64_t open_data(const std::optional<data::Tokenizer>& tokenizer, bool training);   // the task's data; its vocabulary
    void build_model(int64_t vocab, bool load_pretrained);
    void build_optimizer(bool data_parallel);
    void open_corpus(const std::optional<data::Tokenizer>& tokenizer, bool training);   // text tokens or shards
    void open_shards(int64_t T, int64_t model_vocab, bool training);
    double mean_loss(const std::vector<std::pair<Tensor, Tensor>>& batches);
    using WindowFetch = std::function<std::pair<Tensor, Tensor>(uint64_t first, int64_t n)>;
    // The mean loss over windows [0, windows) that fetch reads, B at a time, and "full split: ...".
    std::pair<double, std::string> split_loss(uint64_t windows, const WindowFetch& fetch);

    RunConfig cfg_;
    Corpus corpus_;
    std::optional<data::AdditionTask> addition_;
    std::unique_ptr<data::BatchSampler> sampler_;   // text task, a text file
    std::unique_ptr<ShardData> shards_;             // text task, token shards
    uint64_t data_position_ = 0;                    // shards: training windows consumed, all ranks
    std::string data_unavailable_;                  // sample/eval: why the shards could not be opened
    data::SamplerState addition_state_;             // addition task
    std::shared_ptr<LanguageModel> model_;
    std::function<void()> before_optimizer_step_;   // set_before_optimizer_step
    std::unique_ptr<Precision> precision_;          // without --zero
    std::unique_ptr<ZeroTraining> zero_;            // with --zero
    std::unique_ptr<dist::DistributedDataParallel> ddp_;   // data parallel (launched, no --zero)
    int rank_ = 0, world_size_ = 1;
    StepLayout layout_;                              // at a world size the run was not started with: elastic
    Device device_;
    int64_t step_ = 0;
};

}  // namespace ampgrad::app
