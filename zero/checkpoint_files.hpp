// zero/checkpoint_files.hpp: the file side of ZeRO checkpoints (zero/checkpoint.hpp), with no
// engine and no process group: names, checksums, the manifest's checks, and reading a flat element
// range [begin, end) that may span several ranks' files (resharding). Text files are written with
// core/atomic_file.hpp.
#pragma once
#include "io/safetensors_format.hpp"
#include "nn/module.hpp"

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ampgrad::zero::detail {

std::string rank_file_name(int rank, int world_size);   // "rank-00001-of-00004.safetensors"
uint64_t file_fnv1a64(const std::string& path);          // FNV-1a over every byte; CheckpointError if unreadable
std::string hex64(uint64_t v);

// One saved rank's file, checked against the manifest (present, its size, its checksum, its header).
struct RankFile {
    int rank = 0;
    std::string path;
    int64_t flat_begin = 0, numel = 0;   // the real flat elements [flat_begin, flat_begin + numel) it holds
    io::Header header;
};

// A checkpoint directory opened for reading: the manifest and every rank file, verified.
struct SavedCheckpoint {
    std::string dir, manifest_path;
    nlohmann::json manifest;
    std::vector<RankFile> files;
};
// only_rank >= 0: that rank's file alone (a node-local checkpoint: the others are on other hosts).
SavedCheckpoint open_checkpoint(const std::string& dir, int only_rank = -1);

// CheckpointError unless the saved parameter list is exactly (names, shapes), in order.
void check_parameters(const SavedCheckpoint& ck, const std::vector<std::string>& names,
                      const std::vector<std::vector<int64_t>>& shapes);

// Elements [begin, end) of the flat tensor `name` ("param", "master", "optim.exp_avg"), whose
// pieces the rank files hold, as one CPU tensor in the saved dtype; only those bytes are read.
Tensor read_flat_range(const SavedCheckpoint& ck, const std::string& name, int64_t begin, int64_t end);
// A whole tensor of one file (a 0-dim optimizer counter, a buffer), as saved, on the CPU.
Tensor read_whole(const RankFile& file, const std::string& name);
bool has_tensor(const RankFile& file, const std::string& name);

}  // namespace ampgrad::zero::detail
