// dist/process_group.cpp: rendezvous from the environment, the default group and the free
// functions of ampgrad::dist (see process_group.hpp). The Gloo collectives are in gloo_group.cpp.
#include "dist/process_group.hpp"

#include "ampgrad_config.h"

#include <cstdlib>
#include <mutex>
#include <thread>

#include "core/device_registry.hpp"
#include "dist/flight_recorder.hpp"
#include "dist/staged_group.hpp"
#include "dist/recording_group.hpp"
#include "dist/send_recv_rules.hpp"
#include "dist/socket_address.hpp"
#include "dist/startup_watch.hpp"

namespace ampgrad::dist {

namespace {

// The GPU an NCCL rank uses, as dist/nccl_group.cpp picks it: LOCAL_RANK % the GPUs on the node.
Device nccl_device(const RendezvousInfo& info) {
    const int gpus = device_count(kCUDA);
    return Device(kCUDA, gpus > 0 ? info.local_rank % gpus : 0);
}

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

// Every rank claims its rank: two processes with one RANK are an error.
void claim_rank(TCPStore& store, const RendezvousInfo& info, const InitOptions& opt) {
    const std::string base = "rdzv/" + opt.group_name + "/";
    if (info.rank == 0) store.set_string(base + "world_size", std::to_string(info.world_size));
    if (store.add(base + "claims/" + std::to_string(info.rank), 1) > 1)
        throw DistError(fmt::format("init_process_group('{}'): two processes claim RANK={} (world size {})",
                                    opt.group_name, info.rank, info.world_size));
}

DistTimeoutError join_timeout(TCPStore& store, const RendezvousInfo& info, const InitOptions& opt) {
    // Naming the missing ranks asks the store again; rank 0 (its host) may have timed out and left
    // in the meantime, and then that is the fact to report.
    std::string missing;
    try {
        missing = missing_ranks(store, "rdzv/" + opt.group_name + "/joined/", info.world_size);
    } catch (const StoreError&) {
        return DistTimeoutError(fmt::format(
            "init_process_group('{}'): not all {} ranks joined within {} ms, and rank 0, which hosts the store, "
            "left before rank {} could ask which are missing (is WORLD_SIZE right, and did every process start?)",
            opt.group_name, info.world_size, opt.timeout.count(), info.rank));
    }
    return DistTimeoutError(fmt::format(
        "init_process_group('{}'): rank(s) {} of world size {} did not join within {} ms "
        "(is WORLD_SIZE right, and did every process start?)",
        opt.group_name, missing, info.world_size, opt.timeout.count()));
}

// Checks WORLD_SIZE against rank 0's, then waits until all ranks have joined, polling the store so
// that a rank that fails or exits meanwhile stops this one at once (dist/startup_watch.hpp).
// Ranks that never arrive are named in the timeout error.
void wait_for_members(TCPStore& store, const RendezvousInfo& info, const InitOptions& opt) {
    const std::string base = "rdzv/" + opt.group_name + "/";
    std::string ws0 = std::string(store.get_string(base + "world_size"));
    if (ws0 != std::to_string(info.world_size))
        throw DistError(fmt::format("init_process_group('{}'): WORLD_SIZE={} on rank {} but {} on rank 0",
                                    opt.group_name, info.world_size, info.rank, ws0));
    store.set_string(base + "joined/" + std::to_string(info.rank), "1");
    std::vector<std::string> keys;
    for (int r = 0; r < info.world_size; ++r) keys.push_back(base + "joined/" + std::to_string(r));
    const auto deadline = std::chrono::steady_clock::now() + opt.timeout;
    try {
        for (int poll = 0; !store.check(keys); ++poll) {
            const std::string failed = failed_peer(store, opt.group_name, info.rank, info.world_size, poll % 25 == 0);
            if (!failed.empty())
                throw PeerFailedError(fmt::format("init_process_group('{}'): rank {} of {} stopped while waiting for "
                                                  "all ranks to join, because {}", opt.group_name, info.rank,
                                                  info.world_size, failed));
            if (std::chrono::steady_clock::now() > deadline) throw join_timeout(store, info, opt);
            std::this_thread::sleep_for(Millis(20));
        }
    } catch (const StoreError& e) {
        throw DistError(fmt::format(
            "init_process_group('{}'): rank 0, which hosts the store, left while rank {} waited for all {} ranks "
            "to join (it probably timed out or died first): {}", opt.group_name, info.rank, info.world_size, e.what()));
    }
}

// Rank 0 hosts the store: after its own start-up failed, it keeps the store up until the other
// ranks have read its abort and left (2 s at most), so that they can say why it failed instead of
// only that the store is gone.
void linger_for_peers(TCPStore& store, const RendezvousInfo& info, const std::string& group) {
    if (info.rank != 0) return;
    const auto until = std::chrono::steady_clock::now() + Millis(2000);
    try {
        for (int r = 1; r < info.world_size && std::chrono::steady_clock::now() < until;) {
            if (store.check({gone_key(group, r)})) ++r;
            else std::this_thread::sleep_for(Millis(20));
        }
    } catch (const DistError&) {
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
    // One process may start with nothing set (rank 0 of 1). With more, each must be told its rank, as
    // torch.distributed's env:// requires: a default would have two ranks both claim rank 0 and wait
    // for each other until the timeout. (MASTER_ADDR and MASTER_PORT default to 127.0.0.1:29500.)
    if (info.world_size > 1 && !opt.rank && !env_int({"RANK", "SLURM_PROCID"}))
        throw ValueError(fmt::format("init_process_group: environment variable RANK expected, but not set "
                                     "(WORLD_SIZE={}); launch with ampgrad-run, or set RANK", info.world_size));
    if (info.rank < 0 || info.rank >= info.world_size)
        throw ValueError(fmt::format("init_process_group: RANK={} is outside [0, WORLD_SIZE={})", info.rank,
                                     info.world_size));
    if (info.master_port < 0 || info.master_port > 65535)
        throw ValueError(fmt::format("init_process_group: MASTER_PORT={} is not a TCP port", info.master_port));
    if (info.master_port == 0 && info.world_size > 1)   // only the store's own process learns the port
        throw ValueError(fmt::format("init_process_group: MASTER_PORT=0 (any free port) needs WORLD_SIZE=1, but it is {}",
                                     info.world_size));
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
    info.master_port = store->port();   // the kernel's pick where the port was 0 (a group of one)
    claim_rank(*store, info, options);
    // If this process dies, the store marks it gone: the others stop at once (during start-up) or
    // name it in their errors (in a collective).
    store->set_on_disconnect(gone_key(options.group_name, info.rank));
    std::unique_ptr<ProcessGroup> group;
    try {
        // The host, named by the address that routes to the master (GLOO_SOCKET_IFNAME may be wrong).
        publish_host(*store, options.group_name, info.rank,
                     host_description(route_source_address(info.master_addr, info.master_port)));
        if (backend == "gloo") choose_socket(info.master_addr, info.master_port);   // a bad interface fails before joining
        wait_for_members(*store, info, options);
        group = backend == "nccl" ? make_staged_group(make_nccl_group(store, info, options), nccl_device(info))
                                   : make_staged_group(make_gloo_group(store, info, options), Device(kCPU));
    } catch (const PeerFailedError&) {
        linger_for_peers(*store, info, options.group_name);   // the failed peer published its own abort
        throw;
    } catch (const std::exception& e) {
        publish_abort(*store, options.group_name, info.rank, e.what());
        linger_for_peers(*store, info, options.group_name);
        throw;
    }
    store->set_string(ready_key(options.group_name, info.rank), "1");
    s.group = make_recording_group(std::move(group), store);   // the flight recorder and the watchdog
    s.store = std::move(store);
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

WorkPtr ProcessGroup::send_recv(const Tensor& send, int dst, Tensor& recv, int src, bool async_op) {
    (void)send, (void)recv, (void)async_op;
    throw DistError(fmt::format("send_recv(dst={}, src={}) on group '{}': the {} backend has no point-to-point "
                                "transfers", dst, src, name(), backend()));
}

void check_send_recv_peers(int dst, int src, int rank, int world_size, const Tensor& send, const Tensor& recv) {
    for (int peer : {dst, src})
        if (peer < 0 || peer >= world_size)
            throw ValueError(fmt::format("send_recv: peer rank {} is outside [0, world size {})", peer, world_size));
    const bool same_shape = send.numel() == recv.numel() && send.dtype() == recv.dtype();
    if ((dst == rank) != (src == rank) || (dst == rank && !same_shape))
        throw ValueError(fmt::format("send_recv: rank {} may exchange with itself only as both dst and src, with "
                                     "equal sizes; got dst={}, src={}, send {}, recv {}", rank, dst, src,
                                     send.describe(), recv.describe()));
}

int rank() { return default_group().rank(); }
int world_size() { return default_group().world_size(); }
int local_rank() { default_group(); return state().info.local_rank; }
int local_world_size() { default_group(); return state().info.local_world_size; }

namespace {

// "dist_worker.cpp:42", unless a CollectiveSite already names the site.
std::optional<CollectiveSite> site_tag(const Site& site) {
    if (CollectiveSite::current()) return std::nullopt;
    std::string_view file = site.file_name();
    file = file.substr(file.find_last_of('/') + 1);
    return std::optional<CollectiveSite>(std::in_place, fmt::format("{}:{}", file, site.line()));
}

}  // namespace

// `handle` below is another handle to the caller's tensor: the group writes through it.
WorkPtr all_reduce(const Tensor& t, ReduceOp op, bool async_op, Site site) {
    auto tag = site_tag(site);
    Tensor handle = t;
    return default_group().all_reduce(handle, op, async_op);
}
WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op, bool async_op, Site site) {
    auto tag = site_tag(site);
    Tensor handle = output;
    return default_group().reduce_scatter(handle, input, op, async_op);
}
WorkPtr all_gather(const Tensor& output, const Tensor& input, bool async_op, Site site) {
    auto tag = site_tag(site);
    Tensor handle = output;
    return default_group().all_gather(handle, input, async_op);
}
WorkPtr broadcast(const Tensor& t, int src, bool async_op, Site site) {
    auto tag = site_tag(site);
    Tensor handle = t;
    return default_group().broadcast(handle, src, async_op);
}
WorkPtr barrier(bool async_op, Site site) {
    auto tag = site_tag(site);
    return default_group().barrier(async_op);
}

}  // namespace ampgrad::dist
