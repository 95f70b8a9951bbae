// checkpoint.hpp: training checkpoints as directories, written so that a crash at any moment
// (even SIGKILL in the middle of a save) leaves the previous checkpoint loadable.
//
//   OUT/checkpoints/step-00001000/model.safetensors      the model's state_dict (tied head once)
//                                 optimizer.safetensors  AdamW moments and step counters by
//                                                        parameter name, and fp16-master's f32 masters
//                                 state.json             step, run config, model config, tokenizer,
//                                                        sampler position, RNG state, LR schedule,
//                                                        loss-scaler state (hysteresis, growth tracker)
//   OUT/checkpoints/latest                               "step-00001000": written last
//
// A save writes everything into a hidden temporary directory (each file written to a temporary
// name, fsync'd, renamed), fsyncs it, renames it to step-N, fsyncs the parent, and only then
// replaces `latest` the same way. A failed save (a full disk) removes its temporary directory
// and throws IOError; `latest` still names the previous checkpoint.
// `train --ckpt-async` writes the same directories from a copy of the state on a background thread
// (app/async_checkpoint.hpp): publish_checkpoint is the one writer of both.
#pragma once
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "nn/module.hpp"
#include "zero/checkpoint.hpp"

namespace ampgrad::app {

class Trainer;

// A checkpoint's content: the tensors of model.safetensors and optimizer.safetensors and the text of
// state.json. Trainer::checkpoint_content() gives views of the live state (a synchronous save);
// host_copy (app/async_checkpoint.hpp) copies it off the training state.
struct CheckpointContent {
    int64_t step = 0;
    nn::NamedTensors model;       // the model's state_dict (tied head once)
    nn::NamedTensors optimizer;   // Precision::state_tensors()
    nlohmann::json state;         // Trainer::state_json()
};

// Writes the three files of `content` into `dir` (each atomically).
void write_checkpoint_files(const CheckpointContent& content, const std::string& dir);

// Writes root/step-N from `content` through a temporary directory, then points root/latest at it,
// and keeps the newest `keep` checkpoints (see above). Returns the checkpoint's directory.
std::string publish_checkpoint(const CheckpointContent& content, const std::string& root, int keep = 2);

// The checkpoint directory `path` names: itself when it holds state.json, else the one its
// `latest` file names (or OUT/checkpoints/latest). An IOError naming the path when there is none.
// One resolver for both kinds of checkpoint: zero::resolve_checkpoint.
inline std::string resolve_checkpoint(const std::string& path) {
    return zero::resolve_checkpoint(path, "state.json", "checkpoint");
}

// state.json of a checkpoint directory, parsed and checked (IOError for a missing, truncated or
// corrupt file, naming it).
nlohmann::json read_checkpoint_state(const std::string& checkpoint_dir);

// A --preset that disagrees with the preset the checkpoint in `dir` was made with (`saved`) is a
// ValueError naming both; no --preset (nullopt) always agrees.
void check_checkpoint_preset(const std::optional<std::string>& given, const std::string& saved, const std::string& dir);

// Saves `trainer` under root/step-N and points root/latest at it; keeps the newest `keep`
// checkpoints. Returns the checkpoint's directory.
std::string save_checkpoint(const Trainer& trainer, const std::string& root, int keep = 2);

}  // namespace ampgrad::app
