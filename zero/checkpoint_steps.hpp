// zero/checkpoint_steps.hpp: the steps that saving and loading ZeRO checkpoints are made of
// (defined in zero/checkpoint.cpp), shared with the node-local mode (zero/checkpoint_node_local.cpp).
// Every collective step is entered by every rank; a rank's failure travels as text in `error`
// (attempt) until all ranks agree on it (agree), so that none is left waiting in a collective.
#pragma once
#include "zero/checkpoint.hpp"
#include "core/philox.hpp"
#include "zero/checkpoint_files.hpp"

#include <string>
#include <utility>
#include <vector>

namespace ampgrad::zero::detail {

// Runs `body`; an exception becomes the text in `error`, so that this rank still joins the
// agreement collective below instead of leaving the others waiting.
template <typename F>
void attempt(std::string& error, F&& body) {
    if (!error.empty()) return;
    try {
        body();
    } catch (const std::exception& e) {
        error = e.what();
        if (error.empty()) error = "unknown error";
    }
}

std::pair<int64_t, int64_t> real_range(const FlatLayout& l, int rank);   // [begin, end) without the padding
std::vector<int64_t> gather_i64(dist::ProcessGroup& g, const std::vector<int64_t>& values);
void agree(dist::ProcessGroup& g, const std::string& error, const std::string& what);
Tensor flat_params(const ZeroEngine& engine, int64_t b, int64_t e);
void write_rank_file(ZeroEngine& engine, const std::string& path, const nlohmann::json& client_state);
// A save's first step, entered by every rank: this rank writes its file into `folder` (unless
// `error` is already set; a failure goes to `error`), then every rank's (failed, bytes, checksum) is
// gathered, rank-major, three per rank. all_written: no rank failed.
struct RankFileRecords {
    std::vector<int64_t> records;
    bool all_written = false;
};
RankFileRecords write_rank_files(ZeroEngine& engine, const std::string& folder, const nlohmann::json& client_state,
                                 std::string& error);
nlohmann::json make_manifest(ZeroEngine& engine, const std::vector<int64_t>& records, const nlohmann::json& shared_state);
void prune(const std::string& root, int keep, const std::string& current);

GeneratorState saved_rng(const RankFile& f);
void load_buffers(nn::Module& module, const SavedCheckpoint& ck);
void load_optimizer(ZeroEngine& engine, const SavedCheckpoint& ck, int64_t b, int64_t e);
void load_host_state(ZeroEngine& engine, const SavedCheckpoint& ck);
void refresh_stage3_partitions(ZeroEngine& engine);
std::vector<std::vector<int64_t>> shapes_of(const std::vector<Tensor>& params);

// The node-local mode (SaveOptions::node_local): the save, and the load of such a checkpoint.
std::string save_node_local(ZeroEngine& engine, const std::string& root, const std::string& tag, const SaveOptions& o);
LoadResult load_node_local(ZeroEngine& engine, const std::string& dir);

}  // namespace ampgrad::zero::detail
