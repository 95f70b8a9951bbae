// zero/checkpoint.cpp: saving and loading (resharding) ZeRO checkpoints (zero/checkpoint.hpp;
// the file side is in checkpoint_files.cpp). docs/zero.md §5 walks through the format.
#include "zero/checkpoint.hpp"

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/atomic_file.hpp"
#include "core/json_file.hpp"
#include "core/profiler.hpp"
#include "core/philox.hpp"
#include "io/safetensors.hpp"
#include "zero/checkpoint_files.hpp"
#include "zero/checkpoint_steps.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <set>
#include <unistd.h>

namespace ampgrad::zero {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace detail;

namespace detail {   // shared with checkpoint_node_local.cpp (zero/checkpoint_steps.hpp)

// This rank's real flat elements [begin, end): its partition without the padding.
std::pair<int64_t, int64_t> real_range(const FlatLayout& l, int rank) {
    const int64_t b = std::min(l.partition_begin(rank), l.numel());
    return {b, std::min(l.partition_begin(rank) + l.partition_numel(), l.numel())};
}

// The real flat elements [begin, end) this rank's master partition holds (stage 0: all of them).
std::pair<int64_t, int64_t> held_range(ZeroEngine& engine) {
    const int64_t n = engine.layout().numel(), b = engine.master_begin();
    return {std::min(b, n), std::min(b + engine.master_partition().numel(), n)};
}

// Every rank contributes `values` (k each); returns all W*k, rank-major.
std::vector<int64_t> gather_i64(dist::ProcessGroup& g, const std::vector<int64_t>& values) {
    NoGradGuard no_grad;
    const auto k = static_cast<int64_t>(values.size());
    Tensor mine = tensor(values, {k}), all = zeros({k * g.world_size()}, TensorOptions().dtype(kInt64));
    g.all_gather(all, mine, /*async_op=*/false);
    return all.to_vector<int64_t>();
}

// All ranks learn whether any failed; each throws (its own error, or one naming the failed rank).
void agree(dist::ProcessGroup& g, const std::string& error, const std::string& what) {
    std::vector<int64_t> failed = gather_i64(g, {error.empty() ? 0 : 1});
    if (!error.empty()) throw CheckpointError(error);
    for (size_t r = 0; r < failed.size(); ++r)
        if (failed[r]) throw CheckpointError(fmt::format("{}: rank {} failed (its own error names the cause)", what, r));
}

// The trainable parameters' flat elements [b, e), in the model dtype.
Tensor flat_params(const ZeroEngine& engine, int64_t b, int64_t e) {
    const FlatLayout& l = engine.layout();
    Tensor out = zeros({e - b}, TensorOptions().dtype(engine.model_dtype()));
    for (size_t i = 0; i < l.param_count(); ++i) {
        const int64_t lo = std::max(b, l.param_begin(i)), hi = std::min(e, l.param_begin(i) + l.param_numel(i));
        if (lo < hi)
            out.narrow(0, lo - b, hi - lo)
                .copy_(engine.params()[i].detach().reshape({-1}).narrow(0, lo - l.param_begin(i), hi - lo).to(kCPU));
    }
    return out;
}

void write_rank_file(ZeroEngine& engine, const std::string& path, const json& client_state) {
    NoGradGuard no_grad;
    const int R = engine.group().rank(), W = engine.group().world_size();
    // The file's range: this rank's partition (stage 0: the part a stage-1 rank R would own), at its
    // offset `at` in the master partition (0, except in stage 0, which holds everything).
    const auto [b, e] = real_range(engine.file_layout(), R);
    const int64_t at = b - engine.master_begin();
    nn::NamedTensors t;
    t.insert("param", flat_params(engine, b, e));
    const Tensor master = engine.master_partition().detach();
    t.insert("master", master.narrow(0, at, e - b));
    if (const optim::ParamState* st = engine.optimizer().find_state(engine.master_partition()))
        for (const auto& [key, v] : *st) {
            if (v.dim() == 0) t.insert("optim." + key, v);
            else if (v.numel() == master.numel()) t.insert("optim." + key, v.reshape({-1}).narrow(0, at, e - b));
            else
                throw ValueError(fmt::format("save_checkpoint: optimizer state '{}' is {}: neither a scalar nor the "
                                             "partition's size {}", key, v.describe(), master.numel()));
        }
    if (R == 0) {   // buffers and frozen parameters: not partitioned, rank 0 keeps them
        std::set<std::string> trainable(engine.param_names().begin(), engine.param_names().end());
        for (const auto& [name, v] : engine.module().state_dict())
            if (!trainable.count(name)) t.insert("module." + name, v);
    }
    const GeneratorState rng = get_rng_state();
    io::save_safetensors(path, t, {{"format", "ampgrad-zero-rank"}, {"rank", std::to_string(R)},
                                   {"world_size", std::to_string(W)},
                                   {"rng", json{{"seed", rng.seed}, {"offset", rng.offset}}.dump()},
                                   {"client", client_state.dump()}});
}

RankFileRecords write_rank_files(ZeroEngine& engine, const std::string& folder, const json& client_state,
                                 std::string& error) {
    dist::ProcessGroup& g = engine.group();
    const int R = g.rank(), W = g.world_size();
    int64_t bytes = 0;
    uint64_t hash = 0;
    attempt(error, [&] {
        const std::string path = (fs::path(folder) / rank_file_name(R, W)).string();
        write_rank_file(engine, path, client_state);
        bytes = static_cast<int64_t>(fs::file_size(path));
        hash = file_fnv1a64(path);
    });
    RankFileRecords out{gather_i64(g, {error.empty() ? 0 : 1, bytes, static_cast<int64_t>(hash)}), true};
    for (int r = 0; r < W; ++r) out.all_written = out.all_written && out.records[static_cast<size_t>(3 * r)] == 0;
    return out;
}

json make_manifest(ZeroEngine& engine, const std::vector<int64_t>& records, const json& shared_state) {
    const FlatLayout& l = engine.file_layout();
    const int W = l.world_size();
    json m = {{"format", "ampgrad-zero-checkpoint"}, {"version", 1}, {"world_size", W},
              {"stage", engine.config().stage}, {"model_dtype", dtype_name(engine.model_dtype())},
              {"master_dtype", dtype_name(engine.master_partition().dtype())}, {"numel", l.numel()},
              {"partition_numel", l.partition_numel()}};
    json files = json::array();
    for (int r = 0; r < W; ++r) {
        const auto [b, e] = real_range(l, r);
        files.push_back({{"rank", r}, {"file", rank_file_name(r, W)}, {"flat_begin", b}, {"numel", e - b},
                         {"bytes", records[static_cast<size_t>(3 * r + 1)]},
                         {"fnv1a64", hex64(static_cast<uint64_t>(records[static_cast<size_t>(3 * r + 2)]))}});
    }
    json params = json::array();
    for (size_t i = 0; i < l.param_count(); ++i) {
        json pieces = json::array();
        for (const Piece& p : l.pieces(i))
            pieces.push_back({{"file", rank_file_name(p.rank, W)}, {"param_offset", p.param_offset},
                              {"file_offset", p.flat_begin - l.partition_begin(p.rank)}, {"numel", p.numel}});
        params.push_back({{"name", engine.param_names()[i]}, {"shape", engine.params()[i].sizes()},
                          {"flat_begin", l.param_begin(i)}, {"numel", l.param_numel(i)}, {"pieces", pieces}});
    }
    json flat_state = json::array(), scalar_state = json::array(), groups = json::array();
    if (const optim::ParamState* st = engine.optimizer().find_state(engine.master_partition()))
        for (const auto& [key, v] : *st) (v.dim() == 0 ? scalar_state : flat_state).push_back(key);
    for (const optim::ParamGroup& g : engine.optimizer().param_groups()) groups.push_back(g.options);
    m["files"] = files;
    m["parameters"] = params;
    m["optimizer"] = {{"flat_state", flat_state}, {"scalar_state", scalar_state}, {"param_groups", groups}};
    m["scaler"] = engine.loss_scaler() ? json(engine.loss_scaler()->state_dict()) : json(nullptr);
    m["counters"] = {{"global_steps", engine.global_steps()}, {"micro_steps", engine.micro_steps()},
                     {"skipped_steps", engine.skipped_steps()}};
    m["scheduler"] = nullptr;
    if (optim::LRScheduler* s = engine.scheduler()) {
        optim::SchedulerStateDict sd = s->state_dict();
        m["scheduler"] = {{"name", sd.name}, {"last_epoch", sd.last_epoch}, {"base_lrs", sd.base_lrs},
                          {"last_lrs", sd.last_lrs}, {"options", sd.options}};
    }
    m["client"] = shared_state;
    return m;
}

// Removes the temporary directories of saves that died, and step-* directories beyond the newest `keep`.
void prune(const std::string& root, int keep, const std::string& current) {
    std::vector<std::string> steps;
    for (const auto& entry : fs::directory_iterator(root)) {
        const std::string n = entry.path().filename().string();
        if (n.rfind("step-", 0) == 0 && entry.is_directory()) steps.push_back(n);
        if (n.rfind(".step-", 0) == 0 && n.size() > 4 && n.compare(n.size() - 4, 4, ".tmp") == 0) {
            std::error_code ignored;
            fs::remove_all(entry.path(), ignored);
        }
    }
    if (keep <= 0) return;
    std::sort(steps.begin(), steps.end());
    for (size_t i = 0; i + static_cast<size_t>(keep) < steps.size(); ++i)
        if (steps[i] != current) fs::remove_all(fs::path(root) / steps[i]);
}

// A node-local checkpoint whose folder lacks other hosts' files (one copied into one folder loads as any other).
bool only_own_files_here(const std::string& dir) {
    const json m = read_manifest(dir);
    if (!m.contains("node_local")) return false;
    for (const json& f : m.at("files"))
        if (!fs::exists(fs::path(dir) / f.at("file").get<std::string>())) return true;
    return false;
}

// Without node-local storage every rank writes into the temporary folder rank 0 made: a rank that
// cannot see it is on another host, with another disk under that path.
void check_folder_shared(const std::string& tmp, int rank) {
    if (fs::is_directory(tmp)) return;
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    throw CheckpointError(fmt::format(
        "save_checkpoint: rank {} on host {} cannot see the folder {} that rank 0 made: the checkpoint folder must be "
        "on a disk that every host shares (NFS, Lustre), or save node-local (SaveOptions::node_local; "
        "ampgrad train --ckpt-node-local), where each host writes its own ranks' files", rank, host, tmp));
}

}  // namespace detail

std::string save_checkpoint(ZeroEngine& engine, const std::string& root, const std::string& tag, const SaveOptions& o) {
    profiler::Span span("checkpoint", "zero.save_checkpoint", [&] { return "{\"tag\": " + profiler::json_string(tag) + "}"; });
    if (o.node_local) return save_node_local(engine, root, tag, o);
    // Stage 3: every parameter whole while saving (a collective; the files are the same as stages 1 and 2's).
    GatheredParameters whole(engine.stage3());
    dist::ProcessGroup& g = engine.group();
    const int R = g.rank();
    const fs::path final_dir = fs::path(root) / tag, tmp = fs::path(root) / ("." + tag + ".tmp");
    const std::string what = "save_checkpoint " + final_dir.string();
    std::string error;
    if (R == 0) attempt(error, [&] {
        ampgrad::create_directories(root, "save_checkpoint");
        fs::remove_all(tmp);
        ampgrad::create_directories(tmp.string(), "save_checkpoint");
    });
    agree(g, error, what);
    // 1. Every rank writes its file (atomically), then reports its size and checksum.
    attempt(error, [&] { check_folder_shared(tmp.string(), R); });
    const auto [records, all_written] = write_rank_files(engine, tmp.string(), o.client_state, error);
    // 2. Only then rank 0 names them in the manifest, moves the directory into place, and writes `latest`.
    if (R == 0) {
        if (!all_written) {
            std::error_code ignored;
            fs::remove_all(tmp, ignored);
        }
        attempt(error, [&] {
            if (!all_written) return;
            if (o.write_extra) o.write_extra(tmp.string());
            write_file_atomic((tmp / kManifestName).string(), make_manifest(engine, records, o.shared_state).dump(1) + "\n");
            fsync_directory(tmp.string());
            fs::remove_all(final_dir);   // re-saving the same tag
            fs::rename(tmp, final_dir);
            fsync_directory(root);
            write_file_atomic((fs::path(root) / "latest").string(), tag);   // the tag alone, as DeepSpeed writes it
            prune(root, o.keep, tag);
        });
        if (!error.empty()) {
            std::error_code ignored;
            fs::remove_all(tmp, ignored);
        }
    }
    agree(g, error, what);
    return final_dir.string();
}

namespace detail {

GeneratorState saved_rng(const RankFile& f) {
    const json j = json::parse(f.header.metadata.at("rng"));
    return {j.at("seed").get<uint64_t>(), j.at("offset").get<uint64_t>()};
}

void load_buffers(nn::Module& module, const SavedCheckpoint& ck) {
    NoGradGuard no_grad;
    for (const auto& [name, v] : module.state_dict())
        if (has_tensor(ck.files[0], "module." + name)) {
            Tensor saved = read_whole(ck.files[0], "module." + name);
            if (saved.sizes() != v.sizes())
                throw CheckpointError(fmt::format("ZeRO checkpoint {}: buffer '{}' has shape {}, the model's is {}",
                                                  ck.files[0].path, name, saved.describe(), v.describe()));
            Tensor(v).copy_(saved.to(v.dtype()).to(v.device()));
        }
}

void load_optimizer(ZeroEngine& engine, const SavedCheckpoint& ck, int64_t b, int64_t e) {
    NoGradGuard no_grad;
    const json& opt = ck.manifest.at("optimizer");
    Tensor master = engine.master_partition().detach();
    optim::ParamState& st = engine.optimizer().state(engine.master_partition());
    st.clear();
    for (const std::string& key : opt.at("flat_state").get<std::vector<std::string>>()) {
        Tensor mine = read_flat_range(ck, "optim." + key, b, e);
        Tensor full = zeros({master.numel()}, TensorOptions().dtype(mine.dtype()).device(master.device()));
        full.narrow(0, 0, e - b).copy_(mine);
        st[key] = full;
    }
    for (const std::string& key : opt.at("scalar_state").get<std::vector<std::string>>())
        st[key] = read_whole(ck.files[0], "optim." + key);
    auto& groups = engine.optimizer().param_groups();
    const json& saved = opt.at("param_groups");
    if (saved.size() != groups.size())
        throw CheckpointError(fmt::format("ZeRO checkpoint {}: {} optimizer param groups, the engine's optimizer has {}",
                                          ck.manifest_path, saved.size(), groups.size()));
    for (size_t k = 0; k < groups.size(); ++k) groups[k].options = saved[k].get<std::map<std::string, double>>();
}

void load_host_state(ZeroEngine& engine, const SavedCheckpoint& ck) {
    const json& m = ck.manifest;
    if (m.at("scaler").is_null() != (engine.loss_scaler() == nullptr))
        throw CheckpointError(fmt::format("ZeRO checkpoint {}: saved {} fp16 loss scaling, the engine has {}",
                                          ck.manifest_path, m.at("scaler").is_null() ? "without" : "with",
                                          engine.loss_scaler() ? "it" : "none"));
    if (engine.loss_scaler()) engine.loss_scaler()->load_state_dict(m.at("scaler").get<amp::LossScalerStateDict>());
    const json& c = m.at("counters");
    engine.restore_counters(c.at("global_steps").get<int64_t>(), c.at("micro_steps").get<int64_t>(),
                            c.at("skipped_steps").get<int64_t>());
    if (m.at("scheduler").is_null() != (engine.scheduler() == nullptr))
        throw CheckpointError(fmt::format("ZeRO checkpoint {}: saved {} an LR scheduler, the engine has {}",
                                          ck.manifest_path, m.at("scheduler").is_null() ? "without" : "with",
                                          engine.scheduler() ? "one" : "none"));
    if (optim::LRScheduler* s = engine.scheduler()) {
        const json& j = m.at("scheduler");
        optim::SchedulerStateDict sd{j.at("name").get<std::string>(), j.at("last_epoch").get<int64_t>(),
                                     j.at("base_lrs").get<std::vector<double>>(), j.at("last_lrs").get<std::vector<double>>(),
                                     j.at("options").get<std::map<std::string, double>>()};
        s->load_state_dict(sd);
    }
}

// Stage 3, with every parameter gathered and loaded: this rank's partitions of the trainable and of
// the frozen parameters, from the whole ones (GatheredParameters' release then keeps them).
void refresh_stage3_partitions(ZeroEngine& engine) {
    Stage3* s3 = engine.stage3();
    if (!s3) return;
    const int R = engine.group().rank();
    const auto [b, e] = real_range(engine.layout(), R);
    s3->partition().zero_();
    s3->partition().narrow(0, 0, e - b).copy_(flat_params(engine, b, e).to(s3->partition().device()));
    if (!s3->frozen_partition().defined()) return;
    const FlatLayout& fl = s3->frozen_layout();
    const auto [fb, fe] = real_range(fl, R);
    Tensor& part = s3->frozen_partition();
    part.zero_();
    for (size_t i = 0; i < fl.param_count(); ++i) {
        const int64_t lo = std::max(fb, fl.param_begin(i)), hi = std::min(fe, fl.param_begin(i) + fl.param_numel(i));
        if (lo < hi)
            part.narrow(0, lo - fb, hi - lo)
                .copy_(s3->frozen_parameters()[i].detach().reshape({-1}).narrow(0, lo - fl.param_begin(i), hi - lo));
    }
}

std::vector<std::vector<int64_t>> shapes_of(const std::vector<Tensor>& params) {
    std::vector<std::vector<int64_t>> out;
    for (const Tensor& p : params) out.push_back(p.sizes());
    return out;
}

LoadResult load_here(ZeroEngine& engine, const std::string& path) {
    NoGradGuard no_grad;
    LoadResult res;
    res.dir = resolve_checkpoint(path);
    const SavedCheckpoint ck = open_checkpoint(res.dir);
    check_parameters(ck, engine.param_names(), shapes_of(engine.params()));
    const json& m = ck.manifest;
    res.saved_world_size = m.at("world_size").get<int>();
    res.saved_stage = m.at("stage").get<int>();
    const int R = engine.group().rank(), W = engine.group().world_size();
    res.same_world_size = res.saved_world_size == W;
    // Every parameter whole (stage 3 gathered them for the load): read each one.
    const FlatLayout& l = engine.layout();
    for (size_t i = 0; i < l.param_count(); ++i) {
        const Tensor& p = engine.params()[i];
        Tensor saved = read_flat_range(ck, "param", l.param_begin(i), l.param_begin(i) + l.param_numel(i));
        p.detach().copy_(saved.to(p.dtype()).to(p.device()).view(p.sizes()));
    }
    load_buffers(engine.module(), ck);
    refresh_stage3_partitions(engine);
    // This rank's new partition of the masters and the optimizer's flat state (stage 0: all of them),
    // from whichever files hold it.
    const auto [b, e] = held_range(engine);
    Tensor master = engine.master_partition().detach();
    master.zero_();
    master.narrow(0, 0, e - b).copy_(read_flat_range(ck, "master", b, e).to(master.dtype()).to(master.device()));
    load_optimizer(engine, ck, b, e);
    load_host_state(engine, ck);
    for (const RankFile& f : ck.files) {
        const auto& md = f.header.metadata;
        res.all_client_states.push_back(md.count("client") ? json::parse(md.at("client")) : json(nullptr));
    }
    if (R < res.saved_world_size) {
        set_rng_state(saved_rng(ck.files[static_cast<size_t>(R)]));
        res.client_state = res.all_client_states[static_cast<size_t>(R)];
    } else {
        set_rng_state({saved_rng(ck.files[0]).seed ^ (0x9E3779B97F4A7C15ULL * static_cast<uint64_t>(R + 1)), 0});
    }
    res.shared_state = m.contains("client") ? m.at("client") : json(nullptr);
    return res;
}

}  // namespace detail

LoadResult load_checkpoint(ZeroEngine& engine, const std::string& path) {
    // Stage 3: every parameter whole while loading (a collective, so before anything can fail);
    // refresh_stage3_partitions writes the new partitions before the release at the end.
    GatheredParameters whole(engine.stage3());
    LoadResult res;
    std::string error;
    int64_t node_local = 0;
    attempt(error, [&] { node_local = only_own_files_here(resolve_checkpoint(path)) ? 1 : 0; });
    agree(engine.group(), error, "load_checkpoint " + path);
    const std::vector<int64_t> modes = gather_i64(engine.group(), {node_local});
    if (std::count(modes.begin(), modes.end(), node_local) != static_cast<int64_t>(modes.size()))
        throw CheckpointError(fmt::format("load_checkpoint {}: the ranks found node-local and shared checkpoints "
                                          "under this path; give every host the same kind", path));
    // A manifest or a rank file's metadata with a key missing or of the wrong type: a CheckpointError naming the path.
    auto load = [&](auto&& how) { return with_json_errors<CheckpointError>("load_checkpoint", path, how); };
    if (node_local) return load([&] { return load_node_local(engine, resolve_checkpoint(path)); });
    attempt(error, [&] { res = load([&] { return load_here(engine, path); }); });
    agree(engine.group(), error, "load_checkpoint " + path);
    return res;
}

void load_module_parameters(nn::Module& module, const std::string& path) {
    NoGradGuard no_grad;
    const SavedCheckpoint ck = with_json_errors<CheckpointError>("load_module_parameters", path,
                                                [&] { return open_checkpoint(resolve_checkpoint(path)); });
    std::vector<std::string> names;
    std::vector<Tensor> params;
    for (const auto& [name, p] : module.named_parameters())
        if (p.requires_grad()) names.push_back(name), params.push_back(p);
    check_parameters(ck, names, shapes_of(params));
    int64_t at = 0;
    for (const Tensor& p : params) {
        Tensor saved = read_flat_range(ck, "param", at, at + p.numel());
        p.detach().copy_(saved.to(p.dtype()).to(p.device()).view(p.sizes()));
        at += p.numel();
    }
    load_buffers(module, ck);
}

}  // namespace ampgrad::zero
