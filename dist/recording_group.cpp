// dist/recording_group.cpp: RecordingGroup, the decorator that records every collective in the
// flight recorder, and its watchdog thread (see recording_group.hpp for what the watchdog does).
#include "dist/recording_group.hpp"

#include "dist/flight_recorder.hpp"
#include "dist/startup_watch.hpp"

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>

namespace ampgrad::dist {

namespace {

using Clock = std::chrono::steady_clock;

// The signal the watchdog should dump for (SIGUSR1 or SIGTERM), 0 when none.
std::atomic<int> g_dump_signal{0};
extern "C" void on_dump_signal(int sig) { g_dump_signal.store(sig); }

// Installs the dump handler for SIGUSR1 and SIGTERM where the program left the default action;
// returns the signals it took over.
std::vector<int> install_dump_signals() {
    std::vector<int> taken;
    for (int sig : {SIGUSR1, SIGTERM}) {
        struct sigaction current {};
        if (sigaction(sig, nullptr, &current) != 0 || current.sa_handler != SIG_DFL) continue;
        struct sigaction action {};
        action.sa_handler = on_dump_signal;
        sigemptyset(&action.sa_mask);
        if (sigaction(sig, &action, nullptr) == 0) taken.push_back(sig);
    }
    return taken;
}

bool env_flag(const char* name) {
    const char* v = std::getenv(name);
    return v && *v && std::string(v) != "0";
}

std::string site_here() {
    const std::string* s = CollectiveSite::current();
    return s ? *s : "?";
}

class RecordingGroup;

// An async collective's handle: the backend's, plus finishing the entry when it is seen done.
class RecordedWork : public Work {
public:
    RecordedWork(WorkPtr inner, int64_t record_id, RecordingGroup* group)
        : inner_(std::move(inner)), record_id_(record_id), group_(group) {}
    bool is_completed() override;
    void wait(std::optional<Millis> timeout) override;

private:
    WorkPtr inner_;
    int64_t record_id_;
    RecordingGroup* group_;
};

// A collective in flight: sync ones have no work (the caller's thread is inside the backend).
struct InFlight {
    std::weak_ptr<Work> work;
    Clock::time_point started;
    std::string what;
};

class RecordingGroup : public ProcessGroup {
public:
    RecordingGroup(std::unique_ptr<ProcessGroup> inner, std::shared_ptr<TCPStore> store)
        : inner_(std::move(inner)), store_(std::move(store)),
          checksum_(env_flag("AMPGRAD_FR_CHECKSUM")), signals_(install_dump_signals()) {
        watch_ = std::make_unique<TCPStore>(store_->host(), store_->port(), /*is_server=*/false, inner_->timeout());
        watchdog_ = std::thread([this] { watchdog_loop(); });
    }
    ~RecordingGroup() override {
        {
            std::lock_guard lk(m_);
            stop_ = true;
        }
        cv_.notify_all();
        watchdog_.join();
        for (int sig : signals_) std::signal(sig, SIG_DFL);
        if (own_failure_ && rank() == 0) linger_for_peers();
    }

    int rank() const override { return inner_->rank(); }
    int world_size() const override { return inner_->world_size(); }
    const std::string& name() const override { return inner_->name(); }
    std::string backend() const override { return inner_->backend(); }
    Millis timeout() const override { return inner_->timeout(); }
    void abort(const std::string& reason) override { inner_->abort(reason); }

    WorkPtr all_reduce(Tensor& t, ReduceOp op, bool async_op) override {
        return run("all_reduce", reduce_op_name(op), t, async_op, [&] { return inner_->all_reduce(t, op, async_op); });
    }
    WorkPtr reduce_scatter(Tensor& out, const Tensor& in, ReduceOp op, bool async_op) override {
        return run("reduce_scatter", reduce_op_name(op), in, async_op,
                   [&] { return inner_->reduce_scatter(out, in, op, async_op); });
    }
    WorkPtr all_gather(Tensor& out, const Tensor& in, bool async_op) override {
        return run("all_gather", "", in, async_op, [&] { return inner_->all_gather(out, in, async_op); });
    }
    WorkPtr broadcast(Tensor& t, int src, bool async_op) override {
        return run("broadcast", fmt::format("src={}", src), t, async_op,
                   [&] { return inner_->broadcast(t, src, async_op); });
    }
    WorkPtr barrier(bool async_op) override {
        return run("barrier", "", std::nullopt, async_op, [&] { return inner_->barrier(async_op); });
    }
    // No detail: the two ends of a pair name each other, and `ampgrad fr` compares the entries of one
    // sequence number across ranks (the peers are in the backend's error message).
    WorkPtr send_recv(const Tensor& send, int dst, Tensor& recv, int src, bool async_op) override {
        return run("send_recv", "", send, async_op, [&] { return inner_->send_recv(send, dst, recv, src, async_op); });
    }

    // The entry's end, seen by the caller (wait, is_completed) or the watchdog.
    void finished(int64_t record_id, const std::exception* error) {
        {
            std::lock_guard lk(m_);
            in_flight_.erase(record_id);
        }
        if (!error) return flight_recorder().finish(record_id, "completed");
        const bool timed_out = dynamic_cast<const DistTimeoutError*>(error) != nullptr;
        flight_recorder().finish(record_id, timed_out ? "timed_out" : "failed", error->what());
        on_own_failure(error->what());
    }

private:
    template <typename Call>
    WorkPtr run(const char* op, const std::string& detail, std::optional<Tensor> input, bool async_op, Call call) {
        throw_if_aborted(op);
        const int64_t id = flight_recorder().start(entry(op, detail, input));
        {
            std::lock_guard lk(m_);
            in_flight_[id] = {{}, Clock::now(), fmt::format("{} #{}", op, seq_ - 1)};
        }
        WorkPtr work;
        try {
            work = call();
        } catch (const std::exception& e) {
            finished(id, &e);
            throw;
        }
        if (!async_op) {
            finished(id, nullptr);
            return work;
        }
        auto recorded = std::make_shared<RecordedWork>(work, id, this);
        std::lock_guard lk(m_);
        if (auto it = in_flight_.find(id); it != in_flight_.end()) it->second.work = recorded;
        return recorded;
    }

    FlightEntry entry(const char* op, const std::string& detail, const std::optional<Tensor>& input) {
        FlightEntry e;
        e.collective_seq_id = seq_++;
        e.process_group = name();
        e.backend = backend();
        e.op = op;
        e.detail = detail;
        e.site = site_here();
        e.timeout_ms = timeout().count();
        if (input) {
            e.dtype = dtype_name(input->dtype());
            e.input_sizes = input->sizes();
            e.numel = input->numel();
            if (checksum_ && input->device().type == DeviceType::kCPU && input->is_contiguous())
                e.checksum = fnv1a64(input->raw_data(), static_cast<size_t>(input->numel()) * input->element_size());
        }
        return e;
    }

    void throw_if_aborted(const char* op) {
        std::lock_guard lk(m_);
        if (!aborted_.empty())
            throw DistError(fmt::format("{} on group '{}' (rank {} of {}): not started, because the group was aborted: {}",
                                        op, name(), rank(), world_size(), aborted_));
    }

    void dump(const std::string& reason) {
        try {
            const std::string path = dump_flight_recorder(flight_recorder_dir(), rank(), world_size(), reason);
            std::fprintf(stderr, "ampgrad: rank %d wrote its flight recorder to %s (%s)\n", rank(), path.c_str(),
                         reason.c_str());
        } catch (const std::exception& e) {
            std::fprintf(stderr, "ampgrad: rank %d could not write its flight recorder: %s\n", rank(), e.what());
        }
    }

    // This rank's collective failed or timed out: dump once, and tell the others through the store.
    void on_own_failure(const std::string& what) {
        own_failure_ = true;
        if (dumped_.exchange(true)) return;
        dump(what);
        publish_abort(*store_, name(), rank(), what);
    }

    // Rank 0 hosts the store: after its own failure it keeps the store up until every other rank's
    // watchdog has read the abort (and dumped) or is gone, 2 s at most.
    void linger_for_peers() {
        const auto until = Clock::now() + Millis(2000);
        try {
            for (int r = 1; r < world_size() && Clock::now() < until;) {
                if (watch_->check({seen_key(r)}) || watch_->check({gone_key(name(), r)})) ++r;
                else std::this_thread::sleep_for(Millis(20));
            }
        } catch (const DistError&) {
        }
    }
    std::string seen_key(int r) const { return fmt::format("rdzv/{}/abort_seen/{}", name(), r); }

    void watchdog_loop();
    void check_in_flight();
    void check_peers();
    void check_signal();

    std::unique_ptr<ProcessGroup> inner_;
    std::shared_ptr<TCPStore> store_;
    std::unique_ptr<TCPStore> watch_;   // the watchdog's own connection to the store
    bool checksum_;
    std::vector<int> signals_;
    std::atomic<int64_t> seq_{0};       // the next collective_seq_id (collectives are issued in order)
    std::atomic<bool> dumped_{false};
    std::atomic<bool> own_failure_{false};
    std::mutex m_;
    std::condition_variable cv_;
    bool stop_ = false;
    std::map<int64_t, InFlight> in_flight_;
    std::string aborted_;               // why later collectives must not start ("" while usable)
    std::thread watchdog_;
};

bool RecordedWork::is_completed() {
    // Seen done; an error it ended with is recorded when the caller waits for it.
    const bool done = inner_->is_completed();
    if (done) group_->finished(record_id_, nullptr);
    return done;
}

void RecordedWork::wait(std::optional<Millis> timeout) {
    try {
        inner_->wait(timeout);
    } catch (const std::exception& e) {
        group_->finished(record_id_, &e);
        throw;
    }
    group_->finished(record_id_, nullptr);
}

void RecordingGroup::watchdog_loop() {
    for (int tick = 0;; ++tick) {
        {
            std::unique_lock lk(m_);
            if (cv_.wait_for(lk, Millis(100), [&] { return stop_; })) return;
        }
        check_signal();
        check_in_flight();
        if (tick % 2 == 0) check_peers();
    }
}

// Async collectives seen done; any collective past its timeout (plus a grace for the backend's
// own error, which names more) fails the group on this rank and, through the store, on the others.
void RecordingGroup::check_in_flight() {
    std::vector<std::shared_ptr<Work>> works;
    std::string overdue;
    {
        std::lock_guard lk(m_);
        for (auto& [id, f] : in_flight_)
            if (auto work = f.work.lock()) works.push_back(work);
    }
    // is_completed() finishes the entry of a done collective (it takes the lock: called outside it).
    for (auto& work : works) work->is_completed();
    {
        std::lock_guard lk(m_);
        const auto limit = timeout() + Millis(2000);   // the sync wait of GlooGroup::submit gives Gloo as long
        for (auto& [id, f] : in_flight_)
            if (Clock::now() - f.started > limit && aborted_.empty()) overdue = f.what;
    }
    if (overdue.empty()) return;
    const std::string why = fmt::format("{} on group '{}' (rank {} of {}) ran past the collective timeout of {} ms; "
                                        "the watchdog aborted the group", overdue, name(), rank(), world_size(),
                                        timeout().count());
    {
        std::lock_guard lk(m_);
        aborted_ = why;
        for (auto& [id, f] : in_flight_) flight_recorder().finish(id, "timed_out", why);
    }
    on_own_failure(why);
    inner_->abort(why);
}

// Another rank published an abort: dump this rank's recorder too, and refuse later collectives.
void RecordingGroup::check_peers() {
    {
        std::lock_guard lk(m_);
        if (!aborted_.empty()) return;
    }
    if (!watch_->connected()) return;   // the store's host left: the collectives themselves say so
    std::string peer;
    try {
        if (!watch_->check({fmt::format("rdzv/{}/aborted", name())})) return;
        peer = failed_peer(*watch_, name(), rank(), world_size(), /*scan_gone=*/false);
    } catch (const DistError&) {
        return;
    }
    if (peer.empty()) return;   // only this rank aborted
    {
        std::lock_guard lk(m_);
        aborted_ = peer;
    }
    if (!dumped_.exchange(true)) dump(peer);
    try {
        watch_->set_string(seen_key(rank()), "1");
    } catch (const DistError&) {
    }
    inner_->abort(peer);
}

// SIGUSR1: dump and carry on. SIGTERM: dump, then die of it as the default action would.
void RecordingGroup::check_signal() {
    const int sig = g_dump_signal.exchange(0);
    if (sig == 0) return;
    dump(sig == SIGTERM ? "SIGTERM" : "SIGUSR1");
    if (sig == SIGTERM) {
        std::signal(SIGTERM, SIG_DFL);
        std::raise(SIGTERM);
    }
}

}  // namespace

std::unique_ptr<ProcessGroup> make_recording_group(std::unique_ptr<ProcessGroup> inner, std::shared_ptr<TCPStore> store) {
    return std::make_unique<RecordingGroup>(std::move(inner), std::move(store));
}

}  // namespace ampgrad::dist
