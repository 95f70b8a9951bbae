// run_config.hpp: everything a training run is made of (model, data, optimiser, precision,
// logging), as set by `ampgrad train`'s flags and saved in every checkpoint's state.json, so
// that `--resume`, `sample` and `eval` rebuild exactly the same run.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "models/model_family.hpp"

namespace ampgrad::app {

struct RunConfig {
    // model: a family of the model table (models/model_family.hpp: gpt, llama, qwen2), a preset of
    // it, then any overrides (0 / negative: keep the preset's value; for a Llama or Qwen2, n_layer,
    // n_head, n_embd and block_size override num_hidden_layers, num_attention_heads, hidden_size and
    // max_position_embeddings)
    std::string model = "gpt";          // --model: a family's name
    bool model_given = false;           // --model was typed (settle_model); not saved
    std::string preset = "nano";
    int64_t n_layer = 0, n_head = 0, n_embd = 0, block_size = 0;
    double dropout = 0.0;
    bool checkpoint_blocks = false;
    // --init-from DIR: start from a Hugging Face folder's weights (models/pretrained.hpp): any family's
    // (GPT-2, Llama, Mistral, Qwen2), which sets `model`. The trainer copies the folder's sizes into
    // the fields above and these, and keeps the folder's config (PretrainedConfig::config) in
    // pretrained_config, so that a checkpoint rebuilds the model without the folder; vocab_size 0: the
    // tokenizer's, eps 0: the preset's. block_size is the training context: a GPT-2's n_positions, at
    // most a RoPE model's max_position_embeddings (which the model, and an export, keeps).
    std::string init_from;
    int64_t vocab_size = 0;
    double layer_norm_epsilon = 0.0;
    nlohmann::json pretrained_config;   // null: a preset (and runs from a GPT-2 folder before issue 33)
    // The folder's own config.json and generation_config.json (null when absent), kept so that
    // `export --hf` gives back the fields ampgrad does not model (bos/eos ids, rope_parameters'
    // style, the generation defaults): {"config.json": ..., "generation_config.json": ...}.
    nlohmann::json pretrained_files;
    // --lora SPEC (models::parse_lora_flag): adapters on the --init-from model, which stays frozen
    // (app/lora_run.hpp); saved, so a resume re-attaches them. --qlora: the NF4 base (saved too).
    // adapter: sample/eval --hf BASE --adapter DIR, a PEFT adapter folder (not saved).
    std::string lora;
    bool qlora = false;
    std::string adapter;
    // data
    std::string task = "text";          // text | addition
    // A text file (empty: the bundled Tiny Shakespeare), or token shards in llm.c's format
    // (data/token_shards.hpp): a folder, a glob or a *.bin file (app/shard_data.hpp).
    std::string data_file;
    std::string val_data;               // shards: the validation shards (default: *_val_* beside data_file)
    std::string data_format;            // "text" or "shards": what data_file was found to be ("": not looked yet)
    // auto | char | byte | gpt2:DIR | tiktoken:FILE (text task; app/trainer.cpp's make_tokenizer,
    // docs/tokenizers.md). auto: gpt2:DIR when the --init-from / --hf folder DIR holds vocab.json and
    // merges.txt (as a Hub GPT-2 does), else char; the trainer replaces it with what it chose.
    std::string tokenizer = "auto";
    int64_t digits = 2;                 // addition task
    // optimisation: AdamW, linear warm-up then cosine decay to min_lr
    int64_t steps = 1500;
    int64_t batch_size = 32;            // sequences per micro-step, all ranks together
    // Gradient accumulation: micro-steps per optimiser step (tokens per step = batch_size * T *
    // grad_accum). total_batch_size > 0 (tokens, llm.c's -d) derives grad_accum (resolve_accumulation).
    int64_t grad_accum = 1;
    int64_t total_batch_size = 0;
    double lr = 2e-3, min_lr = 2e-4;
    int64_t warmup = 100;
    double weight_decay = 0.1, beta1 = 0.9, beta2 = 0.99, grad_clip = 1.0;
    uint64_t seed = 1337;
    // precision and device
    std::string prec = "fp32";          // fp32 | bf16 | fp16 | fp16-master | fp8
    std::string fp8_recipe = "delayed"; // --prec fp8: delayed | tensorwise | rowwise (app/fp8_run.hpp)
    std::string device = "cpu";         // cpu | cuda
    double init_scale = 65536.0;        // fp16 / fp16-master: the first loss scale
    int64_t scale_window = 1000;        // clean steps before the scale grows (GradScaler growth_interval)
    int64_t hysteresis = 2;             // fp16-master: overflows tolerated before the scale drops
    // ZeRO (app/zero_training.hpp): -1 off (no engine: one process); 0, 1, 2 or 3 the stage, on every
    // process ampgrad-run starts (0: data parallel, nothing partitioned)
    int64_t zero = -1;
    // --deterministic (app/deterministic_run.hpp, docs/determinism.md): the same bits in every layout
    bool deterministic = false;
    // evaluation
    int64_t eval_every = 250, eval_iters = 20;
    // multiple-choice evaluation in HellaSwag's layout (app/hellaswag_eval.hpp): the jsonl file (empty:
    // none), every N steps (0: only at the end), the first N examples (0: all). May change on --resume.
    std::string hellaswag;
    int64_t hellaswag_every = 0, hellaswag_limit = 0;

    // The model as its family builds it (models/model_family.hpp): the preset with the overrides, or
    // the pretrained config; V is vocab_size when set, else the tokenizer's.
    models::ModelSpec model_spec(int64_t tokenizer_vocab, int64_t min_context = 0) const;
    const models::ModelFamily& family() const { return models::model_family(model); }
    // The training context T (the family's context_length of model_spec).
    int64_t context_length(int64_t tokenizer_vocab) const;
    // The model's vocabulary: vocab_size when set (a pretrained model's), else the tokenizer's.
    int64_t model_vocab_size(int64_t tokenizer_vocab) const { return vocab_size > 0 ? vocab_size : tokenizer_vocab; }
    // --model and --preset as typed: --model alone takes the family's first preset ("llama-nano");
    // --preset alone takes the family that has it.
    void settle_model(bool model_given, bool preset_given);
    void validate() const;                                       // ValueError naming the flag and value
    // --total-batch-size: sets grad_accum to total / (batch_size * T); ValueError when it does not
    // divide, or disagrees with a --grad-accum other than 1.
    void resolve_accumulation(int64_t T);
};

nlohmann::json to_json(const RunConfig& c);
RunConfig run_config_from_json(const nlohmann::json& j);   // ValueError naming a missing or bad key
// Every preset --preset accepts, family by family.
std::vector<std::string> all_preset_names();

}  // namespace ampgrad::app
