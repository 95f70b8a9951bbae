// zero/checkpoint.hpp: ZeRO checkpoints that load at any world size with no offline step
// (DeepSpeed needs its ds_to_universal.py conversion for that; see docs/zero.md §5).
//
//   root/step-00000100/rank-00000-of-00004.safetensors   rank 0's flat range of the parameters
//                      rank-00001-of-00004.safetensors   ("param", model dtype), the f32 masters
//                      ...                               ("master") and the optimizer's flat state
//                                                        ("optim.exp_avg", ...), plus its RNG and
//                                                        client state (data position) as metadata
//                      manifest.json                     every parameter's flat range -> files and
//                                                        offsets; every file's size and checksum;
//                                                        scaler, counters, scheduler, param groups
//   root/latest                                          "step-00000100", written last
//
//   zero::save_checkpoint(engine, "ckpt", "step-00000100", {.client_state = {{"offset", 42}}});
//   zero::LoadResult r = zero::load_checkpoint(engine, "ckpt");   // any world size, stage 1, 2 or 3
//
// Both are collectives: every rank of the engine's group calls them. Without node_local (below),
// `root` must be one folder that every rank sees (one host, or a shared disk). A save writes into a hidden
// temporary directory: each rank its own file (temporary name, fsync, rename), then one all-gather
// confirms every file (its size and FNV-1a checksum) before rank 0 writes the manifest, renames the
// directory into place and replaces `latest`. A load reads, on each rank, only the byte ranges of
// the files that hold its new partition (and the full parameters, which stages 1 and 2 keep on
// every rank), so the world size and the stage may differ from the save's. Under stage 3 both
// gather every parameter for their duration (zero::GatheredParameters), so the files are the same
// for every stage; the cost is the whole model in memory on each rank while saving or loading.
// A missing, truncated,
// corrupt or mismatched checkpoint is a CheckpointError naming the file and the fact, raised on
// every rank (the ranks agree before returning, so none is left waiting in a collective).
#pragma once
#include "core/error.hpp"
#include "zero/engine.hpp"

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ampgrad::zero {

// A checkpoint that is missing, partial, corrupt, or does not match the model being loaded.
struct CheckpointError : IOError { using IOError::IOError; };

inline constexpr const char* kManifestName = "manifest.json";

struct SaveOptions {
    nlohmann::json client_state;   // this rank's own state (e.g. its data position); load returns it to the same rank
    nlohmann::json shared_state;   // rank 0's, kept in the manifest's "client" (e.g. the run's configuration)
    // Rank 0 calls it with the temporary directory after every rank's file is confirmed and before
    // the manifest is written: extra files then appear atomically with the checkpoint.
    std::function<void(const std::string& dir)> write_extra;
    int keep = 0;                  // keep only the newest `keep` step-* directories under root (0: all); the
                                   // temporary directories of saves that died are always removed
    // Node-local storage (DeepSpeed's checkpoint.use_node_local_storage): `root` is on each host's
    // own disk. The first rank of each host (LOCAL_RANK 0) makes the folder there; every rank writes
    // its file; each host's first rank writes the manifest (marked "node_local", naming the ranks
    // whose files are on that host) and write_extra's files, and renames its folder into place; only
    // after every host has done so is `latest` replaced on each. Loading needs the same world size
    // (each rank reads its own file; the parameters are all-gathered); resharding needs every rank's
    // file in one folder, and says which are missing.
    bool node_local = false;
};

// Saves under root/tag and points root/latest at tag. Returns root/tag. Collective.
std::string save_checkpoint(ZeroEngine& engine, const std::string& root, const std::string& tag,
                            const SaveOptions& options = {});

struct LoadResult {
    std::string dir;                          // the checkpoint directory that was read
    int saved_world_size = 0, saved_stage = 0;
    bool same_world_size = false;             // true: this rank got back exactly its own RNG and client state
    nlohmann::json client_state;              // this rank's (null for a rank the save did not have)
    std::vector<nlohmann::json> all_client_states;   // every saved rank's, by saved rank
    nlohmann::json shared_state;              // the manifest's "client"
};

// Loads into `engine` (built for the current group, any stage): parameters, masters, optimizer
// state, param groups, loss scaler (incl. hysteresis), step counters, scheduler, and this rank's
// RNG. At another world size a rank r < the saved world size takes saved rank r's RNG; a higher
// rank takes a fresh stream derived from saved rank 0's seed. `path`: a checkpoint directory, or a
// root holding `latest`. Collective.
LoadResult load_checkpoint(ZeroEngine& engine, const std::string& path);

// The checkpoint directory `path` names: itself when it holds `marker`, else the one its `latest`
// file names, or else the one path/checkpoints/latest names (a run's output folder). app/ finds
// its checkpoints here too (marker state.json). CheckpointError naming the path when there is
// none; its message starts with `kind`.
std::string resolve_checkpoint(const std::string& path, const std::string& marker = kManifestName,
                               const std::string& kind = "ZeRO checkpoint");

// manifest.json of a checkpoint directory, parsed and checked for its required keys.
nlohmann::json read_manifest(const std::string& dir);

// The consolidated model, with no engine and no process group (for sampling or evaluation on one
// process): every trainable parameter read from the ranks' files into `module` (cast to its
// dtype), plus the buffers and frozen parameters rank 0 saved. Names and shapes are checked.
void load_module_parameters(nn::Module& module, const std::string& path);

}  // namespace ampgrad::zero
