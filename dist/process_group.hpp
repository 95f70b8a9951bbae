// dist/process_group.hpp: ampgrad::dist, collectives across processes (API.md: `ampgrad::dist`).
//
//   dist::init_process_group("gloo");          // rendezvous from the environment (see below)
//   dist::all_reduce(grad, dist::ReduceOp::kAvg);
//   auto work = dist::all_reduce(t, dist::ReduceOp::kSum, /*async_op=*/true);
//   work->wait(std::chrono::seconds(5));        // DistTimeoutError after 5 s
//
// Environment (as torchrun and Slurm set it): RANK (or SLURM_PROCID), WORLD_SIZE (or SLURM_NTASKS),
// LOCAL_RANK (or SLURM_LOCALID), LOCAL_WORLD_SIZE, MASTER_ADDR (default 127.0.0.1), MASTER_PORT
// (default 29500). Rank 0 hosts the TCP store (dist/store.hpp) that the ranks rendezvous through.
// Backends: "gloo" (CPU tensors, dist/gloo_group.cpp); "nccl" (CUDA tensors, dist/nccl_group.cpp;
// compiled but not yet run on a GPU).
// Every collective and every rendezvous wait has a timeout (default 60 s); when a rank dies or
// never arrives, the others raise DistError / DistTimeoutError naming the op, the group and,
// where Gloo's error says which peer it lost, the missing rank.
// Every collective is recorded in the flight recorder (dist/flight_recorder.hpp) by the decorator
// init_process_group puts around the backend's group; its watchdog turns a collective that runs
// past the timeout into an error on every rank (dist/recording_group.hpp).
#pragma once
#include "core/tensor.hpp"
#include "dist/error.hpp"
#include "dist/store.hpp"

#include <chrono>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <vector>

namespace ampgrad::dist {

enum class ReduceOp { kSum, kAvg, kMax };
const char* reduce_op_name(ReduceOp op);

// Overrides for what the environment would give; unset fields come from the environment.
struct InitOptions {
    Millis timeout{60000};                 // every collective's and every rendezvous wait's limit
    std::string group_name = "default";
    std::optional<int> rank, world_size;
    std::optional<std::string> master_addr;
    std::optional<int> master_port;
};

// What rendezvous found: from InitOptions, else the environment, else the defaults.
struct RendezvousInfo {
    int rank = 0, world_size = 1, local_rank = 0, local_world_size = 1;
    std::string master_addr = "127.0.0.1";
    int master_port = 29500;
};
RendezvousInfo rendezvous_info_from_env(const InitOptions& options = {});

// The handle of one collective. wait() rethrows its error; wait(timeout) also throws
// DistTimeoutError when it is not done by then. Done handles are returned by synchronous calls.
class Work {
public:
    virtual ~Work() = default;
    virtual bool is_completed() = 0;
    virtual void wait(std::optional<Millis> timeout = std::nullopt) = 0;
};
using WorkPtr = std::shared_ptr<Work>;

class ProcessGroup {
public:
    virtual ~ProcessGroup() = default;
    virtual int rank() const = 0;
    virtual int world_size() const = 0;
    virtual const std::string& name() const = 0;
    virtual std::string backend() const = 0;
    virtual Millis timeout() const = 0;

    virtual WorkPtr all_reduce(Tensor& t, ReduceOp op, bool async_op) = 0;
    // input: world_size * output.numel() elements; output gets the reduction of chunk rank().
    virtual WorkPtr reduce_scatter(Tensor& output, const Tensor& input, ReduceOp op, bool async_op) = 0;
    // output: world_size * input.numel() elements, rank r's input at chunk r.
    virtual WorkPtr all_gather(Tensor& output, const Tensor& input, bool async_op) = 0;
    virtual WorkPtr broadcast(Tensor& t, int src, bool async_op) = 0;
    virtual WorkPtr barrier(bool async_op) = 0;
    // Point to point, both ways in one call (MPI_Sendrecv): sends `send` to rank `dst` and receives
    // `recv` (its size: what `src` sends) from rank `src`. Every rank of the pair calls it, in the
    // same order as its other collectives. The step of dist::tree_reduce_scatter. The default throws
    // DistError naming the backend (a group without point to point, such as a user's own).
    virtual WorkPtr send_recv(const Tensor& send, int dst, Tensor& recv, int src, bool async_op);

    // Frees every collective of this group that is blocked, after which the group is unusable
    // (NCCL: ncclCommAbort). The watchdog calls it when a collective runs past the timeout. The
    // default does nothing: a backend whose collectives time out by themselves (Gloo) needs no more.
    virtual void abort(const std::string& reason) { (void)reason; }
};

// The default group, made by init_process_group(backend): "gloo" or "nccl".
void init_process_group(const std::string& backend, const InitOptions& options = {});
void destroy_process_group();
bool is_initialized();
ProcessGroup& default_group();       // DistError before init_process_group
TCPStore& default_store();
int rank();
int world_size();
int local_rank();
int local_world_size();

// Collectives on the default group. Tensors must be contiguous CPU tensors (gloo); all_reduce,
// reduce_scatter and broadcast write their tensor in place. Synchronous unless async_op. `site`
// (the caller's file:line) is the calling site the flight recorder notes, unless a
// dist::CollectiveSite is active on this thread. The written tensors are taken by const reference,
// as libtorch's: a Tensor is a handle, so all_reduce(p.grad()) and all_reduce(t.view({-1})) write the
// values they name.
using Site = std::source_location;
WorkPtr all_reduce(const Tensor& t, ReduceOp op = ReduceOp::kSum, bool async_op = false, Site site = Site::current());
WorkPtr reduce_scatter(const Tensor& output, const Tensor& input, ReduceOp op = ReduceOp::kSum, bool async_op = false,
                       Site site = Site::current());
WorkPtr all_gather(const Tensor& output, const Tensor& input, bool async_op = false, Site site = Site::current());
WorkPtr broadcast(const Tensor& t, int src = 0, bool async_op = false, Site site = Site::current());
WorkPtr barrier(bool async_op = false, Site site = Site::current());

// Backend constructors (dist/gloo_group.cpp, dist/nccl_group.cpp). store is shared with the group.
std::unique_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<TCPStore> store, const RendezvousInfo& info,
                                              const InitOptions& options);
std::unique_ptr<ProcessGroup> make_nccl_group(std::shared_ptr<TCPStore> store, const RendezvousInfo& info,
                                              const InitOptions& options);

}  // namespace ampgrad::dist
