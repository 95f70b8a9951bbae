// dist/process_group.cpp: rendezvous from the environment, the default group and the free
// functions of ampgrad::dist (see process_group.hpp). The Gloo collectives are in gloo_group.cpp.
#include "dist/process_group.hpp"

#include "ampgrad_config.h"

#include <cstdlib>
#include <mutex>

namespace ampgrad::dist {

namespace {

struct DefaultGroup {
    std::shared_ptr<TCPStore> store;
    std::unique_ptr<ProcessGroup> group;
    RendezvousInfo info;
};
DefaultGroup& state() {
    static DefaultGroup s;
    return s;
}

// The first of several environment variables that is set, parsed as an int.
std::optional<int> env_int(std::initializer_list<const char*> names) {
    for (const char* name : names) {
        const char* v = std::getenv(name);
        if (!v || !*v) continue;
        char* end = nullptr;
        long x = std::strtol(v, &end, 10);
        if (*end != '\0')
            throw ValueError(fmt::format("init_process_group: environment variable {}='{}' is not an integer", name, v));
        return static_cast<int>(x);
    }
    return std::nullopt;
}

std::string missing_ranks(TCPStore& store, const std::string& prefix, int world_size) {
    std::string out;
    for (int r = 0; r < world_size; ++r)
        if (!store.check({prefix + std::to_string(r)})) out += (out.empty() ? "" : ", ") + std::to_string(r);
    return out;
}

// Every rank announces itself; each then waits for all. Catches a WORLD_SIZE that differs between
// ranks, two processes with one rank, and ranks that never arrive (named in the timeout error).
void check_membership(TCPStore& store, const RendezvousInfo& info, const InitOptions& opt) {
    const std::string base = "rdzv/" + opt.group_name + "/";
    if (info.rank == 0) store.set_string(base + "world_size", std::to_string(info.world_size));
    if (store.add(base + "claims/" + std::to_string(info.rank), 1) > 1)
        throw DistError(fmt::format("init_process_group('{}'): two processes claim RANK={} (world size {})",
                                    opt.group_name, info.rank, info.world_size));
    std::string ws0 = std::string(store.get_string(base + "world_size"));
    if (ws0 != std::to_string(info.world_size))
        throw DistError(fmt::format("init_process_group('{}'): WORLD_SIZE={} on rank {} but {} on rank 0",
                                    opt.group_name, info.world_size, info.rank, ws0));
    store.set_string(base + "joined/" + std::to_string(info.rank), "1");
    std::vector<std::string> keys;
    for (int r = 0; r < info.world_size; ++r) keys.push_back(base + "joined/" + std::to_string(r));
    try {
        store.wait(keys, opt.timeout);
    } catch (const DistTimeoutError&) {
        // Naming the missing ranks asks the store again; rank 0 (its host) may have timed out and
        // left in the meantime, and then that is the fact to report.
        std::string missing;
        try {
            missing = missing_ranks(store, base + "joined/", info.world_size);
        } catch (const StoreError&) {
            throw DistTimeoutError(fmt::format(
                "init_process_group('{}'): not all {} ranks joined within {} ms, and rank 0, which hosts the store, "
                "left before rank {} could ask which are missing (is WORLD_SIZE right, and did every process start?)",
                opt.group_name, info.world_size, opt.timeout.count(), info.rank));
        }
        throw DistTimeoutError(fmt::format(
            "init_process_group('{}'): rank(s) {} of world size {} did not join within {} ms "
            "(is WORLD_SIZE right, and did every process start?)",
            opt.group_name, missing, info.world_size, opt.timeout.count()));
    } catch (const StoreError& e) {
        throw DistError(fmt::format(
            "init_process_group('{}'): rank 0, which hosts the store, left while rank {} waited for all {} ranks "
            "to join (it probably timed out or died first): {}", opt.group_name, info.rank, info.world_size, e.what()));
    }
}

}  // namespace

const char* reduce_op_name(ReduceOp op) {
    switch (op) {
    case ReduceOp::kSum: return "sum";
    case ReduceOp::kAvg: return "avg";
    case ReduceOp::kMax: return "max";
    }
    return "?";
}

RendezvousInfo rendezvous_info_from_env(const InitOptions& opt) {
    RendezvousInfo info;
    info.rank = opt.rank.value_or(env_int({"RANK", "SLURM_PROCID"}).value_or(0));
    info.world_size = opt.world_size.value_or(env_int({"WORLD_SIZE", "SLURM_NTASKS"}).value_or(1));
    info.local_rank = env_int({"LOCAL_RANK", "SLURM_LOCALID"}).value_or(info.rank);
    info.local_world_size =
        env_int({"LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE"}).value_or(info.world_size);
    if (opt.master_addr) info.master_addr = *opt.master_addr;
    else if (const char* a = std::getenv("MASTER_ADDR"); a && *a) info.master_addr = a;
    info.master_port = opt.master_port.value_or(env_int({"MASTER_PORT"}).value_or(29500));
    if (info.world_size < 1)
        throw ValueError(fmt::format("init_process_group: WORLD_SIZE={} must be at least 1", info.world_size));
    if (info.rank < 0 || info.rank >= info.world_size)
        throw ValueError(fmt::format("init_process_group: RANK={} is outside [0, WORLD_SIZE={})", info.rank,
                                     info.world_size));
    if (info.master_port < 0 || info.master_port > 65535)
        throw ValueError(fmt::format("init_process_group: MASTER_PORT={} is not a TCP port", info.master_port));
    return info;
}

void init_process_group(const std::string& backend, const InitOptions& options) {
    auto& s = state();
    if (s.group)
        throw DistError(fmt::format("init_process_group('{}'): the default group is already initialized", backend));
    if (backend != "gloo" && backend != "nccl")
        throw ValueError(fmt::format("init_process_group: unknown backend '{}' (expected \"gloo\" or \"nccl\")", backend));
    if (backend == "nccl" && !AMPGRAD_WITH_NCCL)
        throw DistError("init_process_group('nccl'): ampgrad was built without NCCL (it needs the CUDA toolkit's "
                        "libnccl); use \"gloo\" for CPU tensors");
    if (backend == "gloo" && !AMPGRAD_WITH_GLOO)
        throw DistError("init_process_group('gloo'): ampgrad was built without Gloo "
                        "(Debian: apt-get install libgloo-dev cmake, then reconfigure)");
    RendezvousInfo info = rendezvous_info_from_env(options);
    auto store = std::make_shared<TCPStore>(info.master_addr, info.master_port, info.rank == 0, options.timeout);
    check_membership(*store, info, options);
    // If this process dies, the store marks it gone: the others name it in their errors.
    store->set_on_disconnect("rdzv/" + options.group_name + "/gone/" + std::to_string(info.rank));
    auto group = backend == "nccl" ? make_nccl_group(store, info, options) : make_gloo_group(store, info, options);
    s.store = std::move(store);
    s.group = std::move(group);
    s.info = info;
}

void destroy_process_group() {
    auto& s = state();
    s.group.reset();
    s.store.reset();
}

bool is_initialized() { return state().group != nullptr; }

ProcessGroup& default_group() {
    if (!state().group)
        throw DistError("ampgrad::dist: no process group: call dist::init_process_group(\"gloo\") first");
    return *state().group;
}

TCPStore& default_store() {
    default_group();
    return *state().store;
}

int rank() { return default_group().rank(); }
int world_size() { return default_group().world_size(); }
int local_rank() { default_group(); return state().info.local_rank; }
int local_world_size() { default_group(); return state().info.local_world_size; }

WorkPtr all_reduce(Tensor& t, ReduceOp op, bool async_op) { return default_group().all_reduce(t, op, async_op); }
WorkPtr reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op, bool async_op) {
    return default_group().reduce_scatter(output, input, op, async_op);
}
WorkPtr all_gather(Tensor& output, const Tensor& input, bool async_op) {
    return default_group().all_gather(output, input, async_op);
}
WorkPtr broadcast(Tensor& t, int src, bool async_op) { return default_group().broadcast(t, src, async_op); }
WorkPtr barrier(bool async_op) { return default_group().barrier(async_op); }

}  // namespace ampgrad::dist
