// generate.cpp: tokens per second of greedy generation (models/generation.hpp) with and without the
// KV cache, on a GPT with a preset's sizes, and the cost of each new token against its position
// (flat with the cache, growing with the context without it). The peer, bench/torch_generate.py,
// times Hugging Face's GPT2LMHeadModel.generate on the same sizes (use_cache True/False);
// bench/generate_bench.py runs both with the same threads and prints one table (docs/benchmarks.md).
// Prints one JSON object on its last line.
#include <ampgrad/ampgrad.h>

#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "bench/bench_util.hpp"

using namespace ampgrad;

namespace {

struct Options {
    std::string preset = "small";
    int64_t block_size = 512, prompt = 16, new_tokens = 256, repeats = 3, bucket = 32;
};

struct Run {
    double seconds = 0, cpu_seconds = 0;   // wall; process CPU (all threads)
    std::vector<double> step_seconds;   // per generated token, in order
};

Run time_generation(const models::GPT& model, const Tensor& prompt, int64_t new_tokens, bool use_cache) {
    models::GenerationConfig g;
    g.max_new_tokens = new_tokens;
    g.use_cache = use_cache;
    Run r;
    double last = bench::now_seconds();
    const double start = last, cpu_start = bench::cpu_seconds();
    models::generate(model, prompt, Tensor(), g, [&](const std::vector<int64_t>&) {
        const double now = bench::now_seconds();
        r.step_seconds.push_back(now - last);
        last = now;
    });
    r.seconds = bench::now_seconds() - start;
    r.cpu_seconds = bench::cpu_seconds() - cpu_start;
    return r;
}

// The median over repeats of the whole run, and of each step's time, then the mean ms per token over
// buckets of steps: {"position": first position of the bucket, "ms": ...}.
std::string summarise(const std::vector<Run>& runs, const Options& o) {
    std::vector<double> totals, cpu;
    for (const Run& r : runs) {
        totals.push_back(r.seconds);
        cpu.push_back(r.cpu_seconds);
    }
    const double total = bench::median(totals);
    std::string buckets;
    for (int64_t b = 0; b < o.new_tokens; b += o.bucket) {
        double ms = 0;
        const int64_t end = std::min(o.new_tokens, b + o.bucket);
        for (int64_t s = b; s < end; ++s) {
            std::vector<double> at;
            for (const Run& r : runs) at.push_back(r.step_seconds[static_cast<size_t>(s)]);
            ms += 1e3 * bench::median(at);
        }
        buckets += fmt::format("{}{{\"position\":{},\"ms\":{:.3f}}}", buckets.empty() ? "" : ",", o.prompt + b,
                               ms / static_cast<double>(end - b));
    }
    return fmt::format("{{\"tokens_per_s\":{:.1f},\"tokens_per_cpu_s\":{:.1f},\"seconds\":{:.4f},"
                       "\"first_token_ms\":{:.3f},\"per_token\":[{}]}}",
                       static_cast<double>(o.new_tokens) / total, static_cast<double>(o.new_tokens) / bench::median(cpu),
                       total, 1e3 * runs.front().step_seconds.front(), buckets);
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"greedy generation tokens/s with and without the KV cache"};
    app.add_option("--preset", o.preset, "GPT preset (sizes)")->capture_default_str();
    app.add_option("--block-size", o.block_size, "positions (the preset's is replaced)")->capture_default_str();
    app.add_option("--prompt", o.prompt, "prompt tokens")->capture_default_str();
    app.add_option("--new-tokens", o.new_tokens, "tokens to generate")->capture_default_str();
    app.add_option("--repeats", o.repeats, "timed runs per mode (medians)")->capture_default_str();
    app.add_option("--bucket", o.bucket, "steps per per-token-cost bucket")->capture_default_str();
    CLI11_PARSE(app, argc, argv);
    models::GPTConfig cfg = models::GPTConfig::preset(o.preset);
    cfg.block_size = o.block_size;
    manual_seed(0);
    models::GPT model(cfg);
    model.eval();
    Tensor prompt = randint(0, cfg.vocab_size, {1, o.prompt});                    // (1,P)
    std::string out = "{";
    for (bool use_cache : {true, false}) {
        time_generation(model, prompt, 8, use_cache);                              // warm-up
        std::vector<Run> runs;
        for (int64_t i = 0; i < o.repeats; ++i) runs.push_back(time_generation(model, prompt, o.new_tokens, use_cache));
        out += fmt::format("{}\"{}\":{}", use_cache ? "" : ",", use_cache ? "cache" : "no_cache", summarise(runs, o));
    }
    std::printf("%s,\"threads\":%d}\n", out.c_str(), omp_get_max_threads());
    return 0;
}
