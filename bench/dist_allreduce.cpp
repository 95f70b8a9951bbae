// dist_allreduce.cpp: all-reduce bandwidth of ampgrad::dist's Gloo group over loopback, one rank
// per process (run under ampgrad-run; bench/dist_bench.py runs it beside its PyTorch peer,
// bench/torch_dist_allreduce.py, which times torch.distributed's Gloo group the same way).
// For each size from 1 KB to 64 MB (f32, sum, synchronous calls): a warm-up, then `repeats` timed
// runs of n calls (n chosen so each run moves at least 64 MB, 2..200 calls); the time per call is
// the median over runs, as rank 0 sees it. Printed as JSON lines "RESULT {...}" with the algorithm
// bandwidth (bytes / time) and the bus bandwidth (algbw * 2(W-1)/W, nccl-tests' convention: the
// traffic per rank of a ring all-reduce).
#include "dist/process_group.hpp"

#include <CLI/CLI.hpp>
#include <cstdio>

#include "autograd/ops/ops.hpp"
#include "bench/bench_util.hpp"

using namespace ampgrad;
namespace dist = ampgrad::dist;

int main(int argc, char** argv) {
    int64_t min_bytes = 1 << 10, max_bytes = 64 << 20, repeats = 5;
    CLI::App app{"all_reduce bandwidth over Gloo, 1 KB to 64 MB"};
    app.add_option("--min-bytes", min_bytes, "smallest message");
    app.add_option("--max-bytes", max_bytes, "largest message");
    app.add_option("--repeats", repeats, "timed runs per size; the median is reported");
    CLI11_PARSE(app, argc, argv);

    dist::init_process_group("gloo");
    const int W = dist::world_size();
    for (int64_t bytes = min_bytes; bytes <= max_bytes; bytes *= 4) {
        Tensor t = ones({bytes / 4});
        int64_t calls = std::clamp<int64_t>((64 << 20) / bytes, 2, 200);
        for (int i = 0; i < 2; ++i) dist::all_reduce(t);   // warm-up
        std::vector<double> per_call;
        for (int64_t r = 0; r < repeats; ++r) {
            dist::barrier();
            double t0 = bench::now_seconds();
            for (int64_t i = 0; i < calls; ++i) dist::all_reduce(t);
            per_call.push_back((bench::now_seconds() - t0) / static_cast<double>(calls));
        }
        double s = bench::median(per_call);
        double algbw = static_cast<double>(bytes) / s / 1e9;
        if (dist::rank() == 0)
            std::printf("RESULT {\"impl\": \"ampgrad\", \"world_size\": %d, \"bytes\": %lld, \"us\": %.2f, "
                        "\"algbw_GBps\": %.4f, \"busbw_GBps\": %.4f}\n",
                        W, static_cast<long long>(bytes), s * 1e6, algbw, algbw * 2.0 * (W - 1) / W);
        std::fflush(stdout);
    }
    dist::destroy_process_group();
    return 0;
}
