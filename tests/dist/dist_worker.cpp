// tests/dist/dist_worker.cpp: one rank of the multi-process tests in dist_test.cpp. The test forks
// and execs N copies with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set; argv[1] picks the scenario:
//   collectives  every collective in f32/f64/f16/bf16/i64, sync and async, against a local computation
//   kill         the last rank SIGKILLs itself during an all_reduce; the others must raise in time
//   init         rendezvous then a barrier (used with a wrong WORLD_SIZE, a busy port, no master)
//   nccl         the NCCL group on a CUDA tensor, and a host tensor through it (a clear DistError without a GPU)
//   staged       CUDA tensors through the Gloo group, as ranks sharing a GPU send them (skipped without one)
//   skip_all_reduce  rank 1 skips one all_reduce: a hang with every process alive, which the
//                flight recorder must name (tests/dist/recording_group_test.cpp)
//   fr_signal    SIGUSR1 makes every rank dump its flight recorder and carry on; SIGTERM dumps, then kills
//   ddp*         DistributedDataParallel against single-process training (tests/dist/ddp_scenarios.cpp)
//   zero*        the ZeRO engine against single-process training (tests/zero/zero_scenarios.cpp)
//   tree         dist::tree_all_reduce against one process's tree (tests/dist/tree_reduce_scenarios.cpp)
//   zckpt*       ZeRO checkpoints: resume, resharding, corrupt files, a rank killed (tests/zero/checkpoint_scenarios.cpp)
//   env, exit7, sleep   for ampgrad-run's tests: print the environment; rank 1 exits 7; sleep
//   flaky        for ampgrad-run --max-restarts: rank 1 exits 9 in the restart rounds below
//                AMPGRAD_TEST_FAIL_ROUNDS (after writing step 10 + round, or 5 with
//                AMPGRAD_TEST_SAME_STEP=1, into AMPGRAD_STEP_FILE) while the others sleep; in a
//                later round every rank prints its round, cause and world size, and exits 0
// AMPGRAD_TEST_TIMEOUT_MS sets the group's timeout. Exit codes: 0 passed, 1 a wrong value, 3 a
// ampgrad::Error (its text printed as "ERROR <what>" on stdout, with the elapsed milliseconds).
#include "autograd/ops/ops.hpp"
#include "core/device_registry.hpp"
#include "dist/flight_recorder.hpp"
#include "dist/process_group.hpp"

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

using namespace ampgrad;
namespace dist = ampgrad::dist;

int run_ddp(const std::string& scenario);   // tests/dist/ddp_scenarios.cpp
int run_zero(const std::string& scenario);  // tests/zero/zero_scenarios.cpp
int run_zero_checkpoint(const std::string& scenario);  // tests/zero/checkpoint_scenarios.cpp
int run_tree_reduce();                                 // tests/dist/tree_reduce_scenarios.cpp

namespace {

int g_failures = 0;

void expect_close(const std::string& what, const std::vector<double>& got, const std::vector<double>& want, double rtol) {
    if (got.size() != want.size()) {
        std::printf("FAIL %s: %zu elements, expected %zu\n", what.c_str(), got.size(), want.size());
        ++g_failures;
        return;
    }
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::abs(got[i] - want[i]) > rtol * std::abs(want[i]) + 1e-12) {
            std::printf("FAIL %s: element %zu is %.9g, expected %.9g\n", what.c_str(), i, got[i], want[i]);
            ++g_failures;
            return;
        }
    }
}

// Rank r's element i: small halves (exact in bf16), negative ones too; integers for int dtypes.
double value(int r, int64_t i, DType dt) {
    double v = (r + 1) * ((i % 5) - 1.5) + 0.5 * (i % 3);
    return is_floating(dt) ? v : std::floor(v * 2);
}

Tensor make(int r, int64_t n, DType dt) {
    std::vector<double> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = value(r, i, dt);
    return tensor(v, {n}).to(dt);
}

std::vector<double> read(const Tensor& t) { return t.to(kFloat64).to_vector<double>(); }

double tolerance(DType dt) {
    switch (dt) {
    case DType::kFloat16: return std::ldexp(1.0, -10);   // one rounding of the fp32 result
    case DType::kBFloat16: return std::ldexp(1.0, -7);
    case DType::kFloat32: return 1e-6;
    default: return 1e-12;
    }
}

// What every collective should give, computed locally from every rank's input.
void check_dtype(DType dt, int64_t n, bool async_op) {
    const int R = dist::rank(), W = dist::world_size();
    const std::string tag = std::string(dtype_name(dt)) + (async_op ? " async" : " sync");
    const double tol = tolerance(dt);
    std::vector<dist::ReduceOp> ops{dist::ReduceOp::kSum, dist::ReduceOp::kMax};
    if (is_floating(dt)) ops.push_back(dist::ReduceOp::kAvg);
    for (auto op : ops) {
        Tensor t = make(R, n, dt);
        auto work = dist::all_reduce(t, op, async_op);
        work->wait(std::chrono::seconds(20));
        std::vector<double> want(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) {
            double acc = op == dist::ReduceOp::kMax ? -1e300 : 0;
            for (int r = 0; r < W; ++r)
                acc = op == dist::ReduceOp::kMax ? std::max(acc, value(r, i, dt)) : acc + value(r, i, dt);
            want[static_cast<size_t>(i)] = op == dist::ReduceOp::kAvg ? acc / W : acc;
        }
        expect_close("all_reduce " + std::string(dist::reduce_op_name(op)) + " " + tag, read(t), want, tol);
    }
    // reduce_scatter: input of W*m elements, rank R keeps the summed chunk R.
    const int64_t m = n;
    Tensor in = make(R, W * m, dt), out = empty({m}, TensorOptions().dtype(dt));
    dist::reduce_scatter(out, in, dist::ReduceOp::kSum, async_op)->wait();
    std::vector<double> want(static_cast<size_t>(m), 0.0);
    for (int64_t i = 0; i < m; ++i)
        for (int r = 0; r < W; ++r) want[static_cast<size_t>(i)] += value(r, R * m + i, dt);
    expect_close("reduce_scatter " + tag, read(out), want, tol);
    // all_gather: chunk r is rank r's input.
    Tensor mine = make(R, n, dt), all = empty({W * n}, TensorOptions().dtype(dt));
    dist::all_gather(all, mine, async_op)->wait();
    want.assign(static_cast<size_t>(W * n), 0.0);
    for (int r = 0; r < W; ++r)
        for (int64_t i = 0; i < n; ++i) want[static_cast<size_t>(r * n + i)] = read(make(r, n, dt))[static_cast<size_t>(i)];
    expect_close("all_gather " + tag, read(all), want, 0);
    // broadcast from the last rank.
    Tensor b = make(R, n, dt);
    dist::broadcast(b, W - 1, async_op)->wait();
    expect_close("broadcast " + tag, read(b), read(make(W - 1, n, dt)), 0);
    // send_recv around the ring: rank R sends its tensor to R+1 and receives R-1's (an odd size, and
    // two ranks exchanging with each other when W is 2).
    Tensor outgoing = make(R, n, dt), incoming = empty({n}, TensorOptions().dtype(dt));
    dist::default_group().send_recv(outgoing, (R + 1) % W, incoming, (R + W - 1) % W, async_op)->wait();
    expect_close("send_recv " + tag, read(incoming), read(make((R + W - 1) % W, n, dt)), 0);
}

int run_collectives() {
    for (DType dt : {kFloat32, kFloat64, kFloat16, kBFloat16, kInt64})
        for (bool async_op : {false, true}) check_dtype(dt, 1003, async_op);
    // Several async calls in flight at once complete in order.
    std::vector<Tensor> ts;
    std::vector<dist::WorkPtr> works;
    for (int k = 0; k < 4; ++k) {
        ts.push_back(full({257}, 1.0 + k));
        works.push_back(dist::all_reduce(ts.back(), dist::ReduceOp::kSum, true));
    }
    for (int k = 0; k < 4; ++k) {
        works[static_cast<size_t>(k)]->wait(std::chrono::seconds(20));
        expect_close("async in flight", read(ts[static_cast<size_t>(k)]),
                     std::vector<double>(257, (1.0 + k) * dist::world_size()), 0);
    }
    // libtorch's spellings: the written tensor by const reference (a gradient, a view); a bool sums as "or"
    Tensor w = full({4}, 1.0 + dist::rank(), TensorOptions().requires_grad(true));
    (w * 2.0).sum().backward();
    dist::all_reduce(w.grad());                                   // grad() is const Tensor&
    expect_close("all_reduce of p.grad()", read(w.grad()), std::vector<double>(4, 2.0 * dist::world_size()), 0);
    Tensor square = full({2, 2}, 1.0);
    dist::all_reduce(square.view({4}));                           // an rvalue view writes its base
    expect_close("all_reduce of a view", read(square), std::vector<double>(4, dist::world_size()), 0);
    Tensor flags = full({3}, dist::rank() == 0).to(kBool);
    dist::all_reduce(flags);
    expect_close("all_reduce sum of a bool is or", read(flags), std::vector<double>(3, 1.0), 0);
    dist::barrier();
    return g_failures ? 1 : 0;
}

// The last rank dies (SIGKILL) while its all_reduce is in flight; the others are in theirs.
int run_kill() {
    const int R = dist::rank(), W = dist::world_size();
    Tensor big = full({1 << 22}, 1.0);
    if (R == W - 1) {
        auto work = dist::all_reduce(big, dist::ReduceOp::kSum, true);
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        std::raise(SIGKILL);
    }
    for (int k = 0; k < 1000; ++k) dist::all_reduce(big, dist::ReduceOp::kSum);
    std::printf("FAIL: no error after the last rank died\n");
    return 1;
}

// Rank 1 (AMPGRAD_TEST_SKIP_RANK) skips step 2's all_reduce of a loop of five; every rank stays alive.
// Gloo pairs collectives by their order, so rank 1's steps 3 and 4 complete with the others' steps 2
// and 3, and the others then wait in step 4's, which rank 1 never issues: they time out, and the
// watchdog tells rank 1, whose next collective is refused. Every rank dumps its flight recorder.
int run_skip_all_reduce() {
    const char* skip_env = std::getenv("AMPGRAD_TEST_SKIP_RANK");
    const int skipping = skip_env ? std::atoi(skip_env) : 1;
    Tensor t = full({8}, 1.0);
    for (int step = 0; step < 5; ++step) {
        if (dist::rank() == skipping && step == 2) continue;
        dist::CollectiveSite site("train step " + std::to_string(step));
        dist::all_reduce(t, dist::ReduceOp::kSum);
    }
    if (dist::rank() == skipping) {   // busy elsewhere (say an evaluation), past the others' timeout
        std::this_thread::sleep_for(dist::default_group().timeout() + std::chrono::milliseconds(3000));
        dist::barrier();
    }
    std::printf("FAIL: no error from the skipped all_reduce\n");
    return 1;
}

// Three all_reduces, then SIGUSR1 to itself: the watchdog dumps within its 100 ms tick, and the run
// goes on. Then the last rank sends itself SIGTERM: it dumps again (reason "SIGTERM") and dies of it.
int run_fr_signal() {
    Tensor t = full({4}, 1.0);
    for (int k = 0; k < 3; ++k) dist::all_reduce(t, dist::ReduceOp::kSum);
    std::raise(SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    dist::barrier();
    std::printf("SURVIVED SIGUSR1\n");
    std::fflush(stdout);
    if (dist::rank() == dist::world_size() - 1) {
        std::raise(SIGTERM);
        std::this_thread::sleep_for(std::chrono::seconds(5));
        std::printf("FAIL: survived SIGTERM\n");
        return 1;
    }
    return 0;
}

// The NCCL group with CUDA tensors (world size 1 still runs NCCL's kernels). Without a GPU,
// init_process_group("nccl") throws a DistError, which main() reports.
int run_nccl() {
    Tensor t = full({1000}, 2.0, TensorOptions().device(kCUDA));
    dist::all_reduce(t, dist::ReduceOp::kSum);
    Tensor all = empty({1000 * dist::world_size()}, TensorOptions().device(kCUDA));
    dist::all_gather(all, t);
    dist::broadcast(t, 0);
    dist::barrier();
    expect_close("nccl all_reduce", read(t.to(kCPU)), std::vector<double>(1000, 2.0 * dist::world_size()), 0);
    expect_close("nccl all_gather", read(all.to(kCPU)),
                 std::vector<double>(static_cast<size_t>(1000 * dist::world_size()), 2.0 * dist::world_size()), 0);

    // Ordering: the collective waits for the kernel that fills its input on ampgrad's current stream.
    // The GEMM (2 x 4096^3 FLOPs, milliseconds of GPU time) is still running when all_gather is
    // queued; an unordered NCCL copy would read its output half-written.
    Tensor ones_matrix = full({4096, 4096}, 1.0, TensorOptions().device(kCUDA));    // (4096,4096)
    Tensor product = matmul(ones_matrix, ones_matrix).view({-1});                     // (4096*4096) all 4096
    Tensor gathered = empty({product.numel() * dist::world_size()}, TensorOptions().device(kCUDA));
    dist::all_gather(gathered, product);
    expect_close("nccl all_gather after a GEMM: min", read(amin(gathered, {0}).to(kCPU)), {4096.0}, 0);
    expect_close("nccl all_gather after a GEMM: max", read(amax(gathered, {0}).to(kCPU)), {4096.0}, 0);
    // A host tensor through the NCCL group: copied to the rank's GPU and back (dist/staged_group.hpp).
    Tensor on_host = full({10}, 1.0);
    dist::all_reduce(on_host, dist::ReduceOp::kSum);
    expect_close("nccl all_reduce of a host tensor", read(on_host), std::vector<double>(10, dist::world_size()), 0);
    // A bool sums as "any rank true" (ncclMax), as on Gloo: never a byte of 2 (or 0 at 256 ranks) in a bool.
    // (The test runs one rank, as NCCL allows one rank per GPU: there it checks the dtype's round trip;
    // with two GPUs the byte sum would show.)
    Tensor flags = full({7}, dist::rank() == 0 ? 1.0 : 0.0, TensorOptions().device(kCUDA)).to(kBool);
    dist::all_reduce(flags, dist::ReduceOp::kSum);
    std::vector<uint8_t> bytes(7);
    std::memcpy(bytes.data(), flags.to(kCPU).raw_data(), bytes.size());
    expect_close("nccl all_reduce of a bool: every byte 1", std::vector<double>(bytes.begin(), bytes.end()),
                 std::vector<double>(7, 1.0), 0);
    if (!g_failures) std::printf("NCCL OK\n");
    return g_failures ? 1 : 0;
}

// "staged": CUDA tensors through the Gloo group, as ranks that share a GPU send them
// (dist/staged_group.hpp): sync and async collectives and a send_recv ring, every result back on the GPU.
int run_staged() {
    if (device_count(kCUDA) == 0) {
        std::printf("STAGED SKIPPED: no CUDA device\n");
        return 0;
    }
    const int w = dist::world_size(), r = dist::rank();
    const TensorOptions gpu = TensorOptions().device(kCUDA);
    Tensor t = full({1000}, 1.0 + r, gpu);
    dist::all_reduce(t, dist::ReduceOp::kSum);                                  // 1 + 2 + ... + w
    Tensor all = empty({1000 * w}, gpu);
    dist::all_gather(all, t, /*async_op=*/true)->wait();
    Tensor send = full({4}, static_cast<double>(r), gpu), recv = empty({4}, gpu);
    dist::default_group().send_recv(send, (r + 1) % w, recv, (r + w - 1) % w, /*async_op=*/false);
    const double sum = w * (w + 1) / 2.0;
    expect_close("staged all_reduce", read(t.to(kCPU)), std::vector<double>(1000, sum), 0);
    expect_close("staged async all_gather", read(all.to(kCPU)), std::vector<double>(static_cast<size_t>(1000 * w), sum), 0);
    expect_close("staged send_recv", read(recv.to(kCPU)), std::vector<double>(4, (r + w - 1) % w), 0);
    if (!all.device().is_cuda() || !recv.device().is_cuda()) {
        std::printf("FAIL: a result left the GPU\n");
        ++g_failures;
    }
    if (!g_failures) std::printf("STAGED OK\n");
    return g_failures ? 1 : 0;
}

int env_int(const char* name, int fallback) {
    const char* v = std::getenv(name);
    return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

// "flaky": see the top of the file.
int run_flaky() {
    const int round = env_int("AMPGRAD_RESTART_COUNT", 0), rank = env_int("RANK", 0);
    if (round >= env_int("AMPGRAD_TEST_FAIL_ROUNDS", 1)) {
        const char* cause = std::getenv("AMPGRAD_RESTART_CAUSE");
        std::printf("round %d world %d cause '%s'\n", round, env_int("WORLD_SIZE", 0), cause ? cause : "");
        return 0;
    }
    if (rank != 1) {
        std::this_thread::sleep_for(std::chrono::seconds(60));
        return 0;
    }
    if (const char* step_file = std::getenv("AMPGRAD_STEP_FILE")) {
        FILE* f = std::fopen(step_file, "w");
        if (f == nullptr) return 2;
        std::fprintf(f, "%d\n", env_int("AMPGRAD_TEST_SAME_STEP", 0) ? 5 : 10 + round);
        std::fclose(f);
    }
    return 9;
}

// Scenarios for the launcher's tests (tools/ampgrad_run.cpp), without a process group.
int run_launcher_scenario(const std::string& scenario) {
    const char* rank = std::getenv("RANK");
    if (scenario == "flaky") return run_flaky();
    if (scenario == "env") {
        for (const char* name : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                                 "OMP_NUM_THREADS"})
            std::printf("%s=%s\n", name, std::getenv(name) ? std::getenv(name) : "(unset)");
        std::fprintf(stderr, "to stderr\n");
        return 0;
    }
    if (scenario == "exit7" && rank && std::string(rank) == "1") return 7;
    std::printf("sleeping\n");
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(60));   // "exit7" (other ranks) and "sleep"
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    const std::string scenario = argc > 1 ? argv[1] : "collectives";
    if (scenario == "env" || scenario == "exit7" || scenario == "sleep" || scenario == "flaky")
        return run_launcher_scenario(scenario);
    dist::InitOptions opts;
    if (const char* t = std::getenv("AMPGRAD_TEST_TIMEOUT_MS")) opts.timeout = dist::Millis(std::atoi(t));
    auto start = std::chrono::steady_clock::now();
    int rc = 0;
    try {
        dist::init_process_group(scenario == "nccl" ? "nccl" : "gloo", opts);
        start = std::chrono::steady_clock::now();
        if (scenario == "collectives") rc = run_collectives();
        else if (scenario == "sigpipe") {   // a write to a gone peer must not kill the process
            std::raise(SIGPIPE);
            std::printf("survived SIGPIPE\n");
        }
        else if (scenario == "kill") rc = run_kill();
        else if (scenario == "nccl") rc = run_nccl();
        else if (scenario == "staged") rc = run_staged();
        else if (scenario == "skip_all_reduce") rc = run_skip_all_reduce();
        else if (scenario == "fr_signal") rc = run_fr_signal();
        else if (scenario == "init") dist::barrier();
        else if (scenario.rfind("ddp", 0) == 0) rc = run_ddp(scenario);
        else if (scenario.rfind("zero", 0) == 0) rc = run_zero(scenario);
        else if (scenario.rfind("zckpt", 0) == 0) rc = run_zero_checkpoint(scenario);
        else if (scenario == "tree") rc = run_tree_reduce();
        else { std::printf("unknown scenario %s\n", scenario.c_str()); rc = 2; }
    } catch (const ampgrad::Error& e) {   // DistError, or ValueError for a bad RANK/WORLD_SIZE
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start);
        std::printf("ERROR %s\nELAPSED_MS %lld\n", e.what(), static_cast<long long>(ms.count()));
        rc = 3;
    }
    std::fflush(stdout);
    dist::destroy_process_group();
    return rc;
}
