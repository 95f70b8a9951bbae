// dist/gloo_group.cpp: the Gloo process group (CPU tensors over TCP). Rendezvous goes through
// ampgrad's TCPStore, adapted to gloo::rendezvous::Store. Collectives run in call order on one
// worker thread per group (Gloo needs the same order on every rank), so async calls return at once
// with a Work handle; synchronous calls wait on theirs. Gloo's errors are rethrown as DistError /
// DistTimeoutError naming the op, the group and, when Gloo's message names the peer address it
// lost, that peer's rank.
#include "ampgrad_config.h"
#include "dist/send_recv_rules.hpp"
#include "dist/gloo_group.hpp"
#include "dist/socket_address.hpp"
#include "dist/startup_watch.hpp"
#include "core/profiler.hpp"

#if AMPGRAD_WITH_GLOO
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>

#include <condition_variable>
#include <csignal>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace ampgrad::dist {

namespace {

// gloo::rendezvous::Store on ampgrad's TCPStore; remembers what it read so that the group can map
// Gloo's peer addresses (as they appear in its error messages) back to ranks.
class GlooStoreAdapter : public gloo::rendezvous::Store {
public:
    GlooStoreAdapter(std::shared_ptr<TCPStore> store, std::string prefix)
        : store_(std::move(store)), prefix_(std::move(prefix)) {}
    void set(const std::string& key, const std::vector<char>& data) override { store_->set(prefix_ + key, data); }
    std::vector<char> get(const std::string& key) override {
        auto v = store_->get(prefix_ + key);
        seen[key] = v;
        return v;
    }
    void wait(const std::vector<std::string>& keys) override { wait(keys, store_->timeout()); }
    void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
        std::vector<std::string> full;
        for (const auto& k : keys) full.push_back(prefix_ + k);
        store_->wait(full, timeout);
    }
    std::map<std::string, std::vector<char>> seen;

private:
    std::shared_ptr<TCPStore> store_;
    std::string prefix_;
};

class GlooWork : public Work {
public:
    explicit GlooWork(std::string what, int64_t bytes = 0) : what_(std::move(what)), bytes_(bytes) {}
    const std::string& what() const { return what_; }
    int64_t bytes() const { return bytes_; }   // the payload, for the profiler's span
    bool is_completed() override {
        std::lock_guard lk(m_);
        return done_;
    }
    void wait(std::optional<Millis> timeout) override {
        std::unique_lock lk(m_);
        if (timeout) {
            if (!cv_.wait_for(lk, *timeout, [&] { return done_; }))
                throw DistTimeoutError(fmt::format("{} did not complete within {} ms", what_, timeout->count()));
        } else {
            cv_.wait(lk, [&] { return done_; });
        }
        if (error_) std::rethrow_exception(error_);
    }
    void finish(std::exception_ptr error) {
        {
            std::lock_guard lk(m_);
            done_ = true;
            error_ = error;
        }
        cv_.notify_all();
    }

private:
    std::string what_;
    int64_t bytes_ = 0;
    std::mutex m_;
    std::condition_variable cv_;
    bool done_ = false;
    std::exception_ptr error_;
};

// Gloo writes to its peers with writev, which raises SIGPIPE once a peer's socket is gone, and the
// default action kills this process on the spot, silently, before Gloo can report the lost rank as an
// error (seen as a rank dying with no output when another was killed mid all_reduce). Python ignores
// SIGPIPE from startup, so PyTorch's Gloo never meets this. Ignored here, unless the program has a
// handler of its own: writev then fails with EPIPE and the collective raises DistError.
void ignore_sigpipe_unless_handled() {
    struct sigaction current {};
    if (sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) std::signal(SIGPIPE, SIG_IGN);
}

class GlooGroup : public ProcessGroup {
public:
    GlooGroup(std::shared_ptr<TCPStore> store, const RendezvousInfo& info, const InitOptions& opt)
        : store_(std::move(store)), name_(opt.group_name) {
        ignore_sigpipe_unless_handled();
        const SocketChoice choice = choose_socket(info.master_addr, info.master_port);
        gloo::transport::tcp::attr attr;
        attr.hostname = choice.address;   // listen there and advertise it (dist/socket_address.hpp)
        auto adapter = std::make_shared<GlooStoreAdapter>(store_, "gloo/" + name_ + "/");
        auto ctx = std::make_shared<gloo::rendezvous::Context>(info.rank, info.world_size);
        ctx->setTimeout(opt.timeout);
        // Gloo's connect cannot watch for failed peers, so it runs on a thread while this one polls
        // the store on a connection of its own (dist/startup_watch.hpp).
        TCPStore watch(store_->host(), store_->port(), /*is_server=*/false, opt.timeout);
        const std::string what = fmt::format("init_process_group('{}'): rank {} of {} connecting to its peers through "
                                              "Gloo from {} (chosen by {})", name_, info.rank, info.world_size,
                                              choice.address, choice.reason);
        try {
            run_watched([ctx, adapter, attr] {
                std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
                ctx->connectFullMesh(*adapter, device);
            }, watch, what, name_, info.rank, info.world_size);
        } catch (const PeerFailedError&) {
            throw;
        } catch (const std::exception& e) {
            throw DistError(fmt::format("{} failed: {}", what, e.what()));
        }
        comm_ = {ctx, opt.timeout, info.rank, info.world_size};
        map_peer_addresses(adapter->seen);
        worker_ = std::thread([this] { work_loop(); });
    }
    ~GlooGroup() override {
        {
            std::lock_guard lk(m_);
            stop_ = true;
        }
        cv_.notify_all();
        worker_.join();
    }

    int rank() const override { return comm_.rank; }
    int world_size() const override { return comm_.world_size; }
    const std::string& name() const override { return name_; }
    std::string backend() const override { return "gloo"; }
    Millis timeout() const override { return comm_.timeout; }

    WorkPtr all_reduce(Tensor& t, ReduceOp op, bool async_op) override {
        check_tensor("all_reduce", t);
        if (op == ReduceOp::kAvg && !t.is_floating_point())
            throw DTypeError(fmt::format("all_reduce: avg needs a floating tensor, got {}", t.describe()));
        if (t.dtype() == kBool && op == ReduceOp::kSum) op = ReduceOp::kMax;   // logical or, as PyTorch's gloo
        if (t.dtype() == kBool && op != ReduceOp::kMax)
            throw DTypeError(fmt::format("all_reduce: a bool tensor reduces with sum or max (logical or) only, got {}",
                                         reduce_op_name(op)));
        return submit(fmt::format("all_reduce({}, {})", reduce_op_name(op), t.describe()), async_op,
                      [t, op](const gloo_impl::Comm& c, uint32_t tag) mutable { gloo_impl::all_reduce(c, t, op, tag); },
                      payload_bytes(t));
    }
    WorkPtr reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op, bool async_op) override {
        check_tensor("reduce_scatter", out);
        check_tensor("reduce_scatter", in);
        check_sizes("reduce_scatter", out, in);
        if (op == ReduceOp::kAvg && !in.is_floating_point())
            throw DTypeError(fmt::format("reduce_scatter: avg needs a floating tensor, got {}", in.describe()));
        return submit(fmt::format("reduce_scatter({}, {})", reduce_op_name(op), in.describe()), async_op,
                      [out, in, op](const gloo_impl::Comm& c, uint32_t tag) mutable {
                          gloo_impl::reduce_scatter(c, out, in, op, tag);
                      }, payload_bytes(in));
    }
    WorkPtr all_gather(Tensor& out, const Tensor& in, bool async_op) override {
        check_tensor("all_gather", out);
        check_tensor("all_gather", in);
        check_sizes("all_gather", in, out);
        return submit(fmt::format("all_gather({})", in.describe()), async_op,
                      [out, in](const gloo_impl::Comm& c, uint32_t tag) mutable { gloo_impl::all_gather(c, out, in, tag); },
                      payload_bytes(out));
    }
    WorkPtr broadcast(Tensor& t, int src, bool async_op) override {
        check_tensor("broadcast", t);
        if (src < 0 || src >= comm_.world_size)
            throw ValueError(fmt::format("broadcast: src={} is outside [0, world size {})", src, comm_.world_size));
        return submit(fmt::format("broadcast(src={}, {})", src, t.describe()), async_op,
                      [t, src](const gloo_impl::Comm& c, uint32_t tag) mutable { gloo_impl::broadcast(c, t, src, tag); },
                      payload_bytes(t));
    }
    WorkPtr barrier(bool async_op) override {
        return submit("barrier", async_op, [](const gloo_impl::Comm& c, uint32_t tag) { gloo_impl::barrier(c, tag); });
    }
    WorkPtr send_recv(const Tensor& send, int dst, Tensor& recv, int src, bool async_op) override {
        check_tensor("send_recv", send);
        check_tensor("send_recv", recv);
        check_send_recv_peers(dst, src, comm_.rank, comm_.world_size, send, recv);
        return submit(fmt::format("send_recv(dst={}, src={}, {})", dst, src, send.describe()), async_op,
                      [send, dst, recv, src](const gloo_impl::Comm& c, uint32_t tag) mutable {
                          gloo_impl::send_recv(c, send, dst, recv, src, tag);
                      }, payload_bytes(send));
    }

private:
    using Job = std::function<void(const gloo_impl::Comm&, uint32_t)>;

    void check_tensor(const char* op, const Tensor& t) const {
        if (t.device().type != DeviceType::kCPU)
            throw DeviceError(fmt::format("{} on the gloo group '{}': needs a CPU tensor, got {}", op, name_, t.describe()));
        if (!t.is_contiguous())
            throw ValueError(fmt::format("{}: needs a contiguous tensor, got {}", op, t.describe()));
    }
    // big.numel() must be world_size * small.numel(), same dtype.
    void check_sizes(const char* op, const Tensor& small, const Tensor& big) const {
        if (small.dtype() != big.dtype())
            throw DTypeError(fmt::format("{}: dtypes differ: {} and {}", op, small.describe(), big.describe()));
        if (big.numel() != small.numel() * comm_.world_size)
            throw ShapeError(fmt::format("{}: {} must have world size {} x the {} elements of {}", op, big.describe(),
                                         comm_.world_size, small.numel(), small.describe()));
    }

    WorkPtr submit(const std::string& what, bool async_op, Job job, int64_t bytes = 0);
    static int64_t payload_bytes(const Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }
    void work_loop();
    std::exception_ptr translate(const std::string& what, const std::exception& e) const;
    void map_peer_addresses(const std::map<std::string, std::vector<char>>& seen);
    std::string ranks_gone(bool died_only) const;
    bool published_abort(int rank) const;

    std::shared_ptr<TCPStore> store_;
    std::string name_;
    gloo_impl::Comm comm_;
    std::map<std::string, int> peer_rank_;   // Gloo's "[ip]:port" of each peer's end -> rank
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<std::pair<std::shared_ptr<GlooWork>, Job>> queue_;
    bool stop_ = false;
    uint32_t next_tag_ = 0;
    std::thread worker_;
};

WorkPtr GlooGroup::submit(const std::string& what, bool async_op, Job job, int64_t bytes) {
    std::string full = fmt::format("{} on group '{}' (rank {} of {})", what, name_, comm_.rank, comm_.world_size);
    auto work = std::make_shared<GlooWork>(full, bytes);
    {
        std::lock_guard lk(m_);
        queue_.emplace_back(work, std::move(job));
    }
    cv_.notify_all();
    if (!async_op) work->wait(comm_.timeout + Millis(2000));   // Gloo itself stops at comm_.timeout
    return work;
}

void GlooGroup::work_loop() {
    for (;;) {
        std::pair<std::shared_ptr<GlooWork>, Job> item;
        {
            std::unique_lock lk(m_);
            cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
            if (queue_.empty()) return;
            item = std::move(queue_.front());
            queue_.pop_front();
        }
        std::exception_ptr error;
        std::string failure;
        try {
            const GlooWork& w = *item.first;   // on the profiler's track of this communication thread
            profiler::Span span("collective", std::string_view(w.what()).substr(0, w.what().find('(')), [&] {
                return fmt::format("{{\"call\": {}, \"bytes\": {}, \"group\": {}}}", profiler::json_string(w.what()),
                                   w.bytes(), profiler::json_string(name_));
            });
            item.second(comm_, next_tag_++);
        } catch (const std::exception& e) {
            error = translate(item.first->what(), e);
            failure = item.first->what() + std::string(" failed: ") + e.what();
        }
        // Publish the abort before waking the caller: it may exit the process at once, and a rank whose
        // process is gone with no abort published is named as the one the job lost.
        if (error) publish_abort(*store_, name_, comm_.rank, failure);   // for the ranks still waiting
        item.first->finish(error);
    }
}

// Gloo's TCP errors name the peer's address ("Connection closed by peer [127.0.0.1]:41234", "Read
// error [..]:..", "Timed out waiting .. for recv operation to complete"); name the rank too.
std::exception_ptr GlooGroup::translate(const std::string& what, const std::exception& e) const {
    const std::string msg = e.what();
    int peer = -1;
    std::string peer_addr, lost;
    for (const auto& [addr, r] : peer_rank_)
        if (msg.find(addr) != std::string::npos) peer = r, peer_addr = addr;
    // A peer that failed in a collective of its own (it published an abort) only passed the failure
    // on: the rank the job lost is one whose process is gone without an abort.
    if (peer >= 0 && !published_abort(peer)) lost = fmt::format(" (lost rank {} at {})", peer, peer_addr);
    if (lost.empty()) lost = ranks_gone(/*died_only=*/peer >= 0);
    if (lost.empty() && peer >= 0) lost = fmt::format(" (lost rank {} at {})", peer, peer_addr);
    const bool timed_out = msg.find("imed out") != std::string::npos || msg.find("imeout") != std::string::npos;
    std::string text = timed_out
        ? fmt::format("{} timed out after {} ms{}: {}", what, comm_.timeout.count(), lost, msg)
        : fmt::format("{} failed{}: {}", what, lost, msg);
    if (timed_out) return std::make_exception_ptr(DistTimeoutError(text));
    return std::make_exception_ptr(DistError(text));
}

bool GlooGroup::published_abort(int rank) const {
    try {
        return store_->check({abort_key(name_, rank)});
    } catch (const DistError&) {
        return false;
    }
}

// Asks the store which ranks' connections closed (process_group.cpp registers "<group>/gone/<rank>");
// died_only: only those that published no abort (killed or crashed, not failed after another).
// The store notices a dead process as fast as Gloo does, so it polls briefly. If the store itself is
// gone, rank 0 (its host) is the one missing.
std::string GlooGroup::ranks_gone(bool died_only) const {
    const std::string base = "rdzv/" + name_ + "/gone/";
    auto until = std::chrono::steady_clock::now() + Millis(1000);
    try {
        for (;;) {
            std::string gone;
            for (int r = 0; r < comm_.world_size; ++r) {
                if (r == comm_.rank || !store_->check({base + std::to_string(r)})) continue;
                if (died_only && store_->check({abort_key(name_, r)})) continue;
                const std::string host = store_->check({host_key(name_, r)}) ? store_->get_string(host_key(name_, r)) : "?";
                gone += fmt::format("{}{} on host {}", gone.empty() ? "" : ", ", r, host);
            }
            if (!gone.empty()) return fmt::format(" (lost rank {}: its process exited)", gone);
            if (std::chrono::steady_clock::now() > until) return "";
            std::this_thread::sleep_for(Millis(20));
        }
    } catch (const DistError&) {
        return " (lost rank 0: the store it hosts is unreachable)";
    }
}

// Gloo's full-mesh rendezvous stores, under key "<rank j>", the addresses of rank j's pairs for every
// other rank in rank order; the one for us is the address our pair with j connects to.
void GlooGroup::map_peer_addresses(const std::map<std::string, std::vector<char>>& seen) {
    const int others = comm_.world_size - 1;
    for (int j = 0; j < comm_.world_size; ++j) {
        auto it = seen.find(std::to_string(j));
        if (j == comm_.rank || it == seen.end() || others == 0 || it->second.size() % others != 0) continue;
        const size_t chunk = it->second.size() / others;
        const size_t index = static_cast<size_t>(comm_.rank < j ? comm_.rank : comm_.rank - 1);
        std::vector<char> bytes(it->second.begin() + index * chunk, it->second.begin() + (index + 1) * chunk);
        try {
            peer_rank_[gloo::transport::tcp::Address(bytes).str()] = j;
        } catch (const std::exception&) {
            // a layout this Gloo does not use: errors then go without the rank
        }
    }
}

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<TCPStore> store, const RendezvousInfo& info,
                                              const InitOptions& options) {
    return std::make_unique<GlooGroup>(std::move(store), info, options);
}

}  // namespace ampgrad::dist

#else  // no Gloo in this build

namespace ampgrad::dist {
std::unique_ptr<ProcessGroup> make_gloo_group(std::shared_ptr<TCPStore>, const RendezvousInfo&, const InitOptions&) {
    throw DistError("init_process_group('gloo'): ampgrad was built without Gloo "
                    "(Debian: apt-get install libgloo-dev cmake, then reconfigure)");
}
}  // namespace ampgrad::dist

#endif  // AMPGRAD_WITH_GLOO
