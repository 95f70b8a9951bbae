// zero/checkpoint_node_local.cpp: ZeRO checkpoints on node-local disks (SaveOptions::node_local,
// DeepSpeed's checkpoint.use_node_local_storage). The first rank of each host (LOCAL_RANK 0) owns
// that host's folder: it makes the temporary folder, writes the manifest (which names the ranks
// whose files are on this host) and moves the folder into place; `latest` follows on every host
// only after every host has confirmed its folder. Loading at the same world size reads each rank's
// own file and all-gathers the parameters; rank 0's buffers are broadcast.
#include "zero/checkpoint_steps.hpp"

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/atomic_file.hpp"
#include "dist/process_group.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <set>
#include <unistd.h>

namespace ampgrad::zero::detail {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string this_host() {
    char name[256] = {};
    gethostname(name, sizeof name - 1);
    return name;
}

// The host's folder: made by its first rank; the others check that they see it.
void make_host_folder(dist::ProcessGroup& g, const fs::path& root, const fs::path& tmp, int leader,
                      const std::string& what) {
    std::string error;
    if (leader == g.rank()) attempt(error, [&] {
        ampgrad::create_directories(root, "save_checkpoint");
        fs::remove_all(tmp);
        ampgrad::create_directories(tmp.string(), "save_checkpoint");
    });
    agree(g, error, what);
    attempt(error, [&] {
        if (!fs::is_directory(tmp))
            throw CheckpointError(fmt::format("{}: rank {} does not see {}, which this host's first rank (rank {}) made: "
                                              "are the ranks of a host consecutive, and LOCAL_RANK right?", what, g.rank(),
                                              tmp.string(), leader));
    });
    agree(g, error, what);
}

// This host's first rank: the manifest naming this host's ranks, write_extra's files, then the folder into place.
void finish_host_folder(ZeroEngine& engine, const fs::path& root, const fs::path& tmp, const fs::path& final_dir,
                        const std::vector<int64_t>& records, const std::vector<int64_t>& leaders, const SaveOptions& o) {
    const int R = engine.group().rank();
    if (o.write_extra) o.write_extra(tmp.string());
    json m = make_manifest(engine, records, o.shared_state);
    std::vector<int> here;
    for (size_t r = 0; r < leaders.size(); ++r)
        if (leaders[r] == R) here.push_back(static_cast<int>(r));
    m["node_local"] = {{"host", this_host()}, {"ranks", here}};
    write_file_atomic((tmp / kManifestName).string(), m.dump(1) + "\n");
    fsync_directory(tmp.string());
    fs::remove_all(final_dir);   // re-saving the same tag
    fs::rename(tmp, final_dir);
    fsync_directory(root.string());
}

}  // namespace

std::string save_node_local(ZeroEngine& engine, const std::string& root, const std::string& tag, const SaveOptions& o) {
    GatheredParameters whole(engine.stage3());
    dist::ProcessGroup& g = engine.group();
    const int R = g.rank();
    const int leader = R - dist::local_rank();   // a host's ranks are consecutive (ampgrad-run, torchrun, srun)
    const fs::path final_dir = fs::path(root) / tag, tmp = fs::path(root) / ("." + tag + ".tmp");
    const std::string what = fmt::format("save_checkpoint {} (node-local)", final_dir.string());
    const std::vector<int64_t> leaders = gather_i64(g, {leader});
    make_host_folder(g, root, tmp, leader, what);
    // 1. Every rank writes its file into its host's folder and reports its size and checksum.
    std::string error;
    const auto [records, all_written] = write_rank_files(engine, tmp.string(), o.client_state, error);
    // 2. Each host's first rank puts its folder in place; 3. once every host has, `latest` on each.
    if (leader == R && all_written) attempt(error, [&] { finish_host_folder(engine, root, tmp, final_dir, records, leaders, o); });
    if (leader == R && (!all_written || !error.empty())) {
        std::error_code ignored;
        fs::remove_all(tmp, ignored);
    }
    agree(g, error, what);
    if (leader == R) attempt(error, [&] {
        write_file_atomic((fs::path(root) / "latest").string(), tag);   // the tag alone, as DeepSpeed writes it
        prune(root, o.keep, tag);
    });
    agree(g, error, what);
    return final_dir.string();
}

namespace {

// This rank's own file of a node-local checkpoint; a clear error when it is not here (another
// world size, or other hosts), naming the files a resharding load would need in one folder.
SavedCheckpoint open_own_file(const std::string& dir, int R, int W) {
    const json m = read_manifest(dir);
    const int saved = m.at("world_size").get<int>();
    const auto here = m.at("node_local").at("ranks").get<std::vector<int>>();
    if (saved == W && std::find(here.begin(), here.end(), R) != here.end()) return open_checkpoint(dir, R);
    std::vector<std::string> missing;
    for (int r = 0; r < saved; ++r)
        if (std::find(here.begin(), here.end(), r) == here.end()) missing.push_back(rank_file_name(r, saved));
    throw CheckpointError(fmt::format(
        "node-local checkpoint {} (saved by {} ranks; this host has the files of rank(s) {}) cannot be loaded by rank {} "
        "of {}: a node-local checkpoint resumes with the same ranks on the same hosts. To resume at another world size, "
        "copy every host's folder into one folder on one disk and resume from that (missing here: {})", dir, saved,
        fmt::join(here, ", "), R, W, fmt::join(missing, ", ")));
}

// Every parameter whole: each rank's saved partition, all-gathered (the padded flat order is the real one).
void gather_parameters(ZeroEngine& engine, const Tensor& mine) {
    const FlatLayout& l = engine.layout();
    Tensor all = zeros({l.padded_numel()}, TensorOptions().dtype(mine.dtype()));
    engine.group().all_gather(all, mine, /*async_op=*/false);
    for (size_t i = 0; i < l.param_count(); ++i) {
        const Tensor& p = engine.params()[i];
        p.detach().copy_(all.narrow(0, l.param_begin(i), l.param_numel(i)).to(p.device()).view(p.sizes()));
    }
}

// Buffers and frozen parameters: rank 0 read them; every rank takes its copy.
void broadcast_module_state(ZeroEngine& engine) {
    const std::set<std::string> trainable(engine.param_names().begin(), engine.param_names().end());
    for (const auto& [name, v] : engine.module().state_dict()) {
        if (trainable.count(name)) continue;
        Tensor copy = v.contiguous().to(kCPU);
        engine.group().broadcast(copy, 0, /*async_op=*/false);
        Tensor(v).copy_(copy.to(v.device()));
    }
}

}  // namespace

LoadResult load_node_local(ZeroEngine& engine, const std::string& dir) {
    NoGradGuard no_grad;
    dist::ProcessGroup& g = engine.group();
    const int R = g.rank(), W = g.world_size();
    const auto [b, e] = real_range(engine.layout(), R);
    const std::string what = fmt::format("load_checkpoint {} (node-local)", dir);
    std::string error;
    SavedCheckpoint ck;
    Tensor mine = zeros({engine.layout().partition_numel()}, TensorOptions().dtype(engine.model_dtype()));
    attempt(error, [&] {
        ck = open_own_file(dir, R, W);
        check_parameters(ck, engine.param_names(), shapes_of(engine.params()));
        mine.narrow(0, 0, e - b).copy_(read_flat_range(ck, "param", b, e).to(mine.dtype()));
        if (R == 0) load_buffers(engine.module(), ck);
    });
    agree(g, error, what);
    gather_parameters(engine, mine);
    broadcast_module_state(engine);
    LoadResult res;
    attempt(error, [&] {
        refresh_stage3_partitions(engine);
        Tensor master = engine.master_partition().detach();
        master.zero_();
        master.narrow(0, 0, e - b).copy_(read_flat_range(ck, "master", b, e).to(master.dtype()).to(master.device()));
        load_optimizer(engine, ck, b, e);
        load_host_state(engine, ck);
        set_rng_state(saved_rng(ck.files.at(0)));
        const auto& md = ck.files.at(0).header.metadata;
        res.dir = dir;
        res.saved_world_size = W;
        res.saved_stage = ck.manifest.at("stage").get<int>();
        res.same_world_size = true;
        res.client_state = md.count("client") ? json::parse(md.at("client")) : json(nullptr);
        res.all_client_states.assign(static_cast<size_t>(W), json(nullptr));
        res.all_client_states[static_cast<size_t>(R)] = res.client_state;
        res.shared_state = ck.manifest.contains("client") ? ck.manifest.at("client") : json(nullptr);
    });
    agree(g, error, what);
    return res;
}

}  // namespace ampgrad::zero::detail
