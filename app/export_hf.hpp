// export_hf.hpp: `ampgrad export --ckpt DIR --hf OUT`: a checkpoint's model as a Hugging Face folder
// (config.json, model.safetensors, and the tokenizer files of a BPE run). A run started --init-from
// a folder gives back that folder's fields ampgrad does not model (bos/eos ids, the rope_parameters
// style of transformers 5, generation_config.json). OUT is written whole: the files go to a hidden
// temporary folder that then replaces OUT, so nothing of an earlier export stays behind; an OUT that
// holds anything but a Hugging Face model's files is refused, naming the file.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include "app/commands.hpp"
#include "data/bpe_tokenizer.hpp"

namespace ampgrad::app {

// {"config.json": ..., "generation_config.json": ...} of a Hugging Face folder (null when a file is absent).
nlohmann::json read_pretrained_files(const std::string& dir);
// config.json written by save_pretrained, completed with the fields of the folder's own config.json
// that it does not write (dtype keys excepted: the export's dtype is its own). When the folder kept
// RoPE in rope_parameters (transformers 5), so does the export.
nlohmann::json merge_pretrained_config(nlohmann::json written, const nlohmann::json& original);
// vocab.json + merges.txt (what --tokenizer gpt2:DIR and transformers' GPT2Tokenizer read) and
// tokenizer.json (Hugging Face tokenizers), each written atomically into the existing folder dir.
void write_tokenizer_files(const data::BpeTokenizer& tok, const std::string& dir);

}  // namespace ampgrad::app
