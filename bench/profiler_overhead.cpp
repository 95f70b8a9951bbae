// profiler_overhead.cpp: what core/profiler.hpp's spans cost (docs/profiling.md, "Cost").
//   1. one Span with profiling off and on, in a tight loop (ns per span);
//   2. the GPT training step (models::GPTConfig::preset, AdamW) with profiling off and on, in alternating
//      rounds, median wall and process-CPU time per step, and the spans one step records.
// No PyTorch peer: this measures ampgrad against itself. A benchmark, never a test.
#include <ampgrad/ampgrad.h>

#include <CLI/CLI.hpp>
#include <cstdio>

#include "bench/bench_util.hpp"
#include "core/profiler.hpp"

using namespace ampgrad;

namespace {

double ns_per_span(int64_t n) {
    const double t0 = bench::now_seconds();
    for (int64_t i = 0; i < n; ++i) profiler::Span span("bench", "empty");
    return 1e9 * (bench::now_seconds() - t0) / static_cast<double>(n);
}

struct StepTimes {
    std::vector<double> wall, cpu;
};

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"bench_profiler_overhead: the cost of profiler spans, off and on"};
    std::string preset = "tiny";
    int64_t batch = 8, steps = 5, rounds = 5;
    app.add_option("--preset", preset, "a GPT preset (models::GPTConfig::preset)")->capture_default_str();
    app.add_option("--batch", batch, "sequences per step")->capture_default_str();
    app.add_option("--steps", steps, "steps per round")->capture_default_str();
    app.add_option("--rounds", rounds, "rounds of each (off and on alternate)")->capture_default_str();
    CLI11_PARSE(app, argc, argv);

    profiler::stop();
    const double off_ns = ns_per_span(200'000'000);
    profiler::start();
    const double on_ns = ns_per_span(1'000'000);
    profiler::stop();
    std::printf("one span: off %.2f ns, on %.0f ns\n", off_ns, on_ns);

    const models::GPTConfig cfg = models::GPTConfig::preset(preset);
    auto gpt = std::make_shared<models::GPT>(cfg);
    Tensor idx = randint(0, cfg.vocab_size, {batch, cfg.block_size});       // (B,T)
    Tensor targets = randint(0, cfg.vocab_size, {batch, cfg.block_size});   // (B,T)
    optim::AdamW opt(gpt->parameters(), optim::AdamWOptions(1e-3).weight_decay(0.1));
    auto step = [&] {
        opt.zero_grad();
        Tensor loss = gpt->forward(idx, targets);   // ()
        loss.backward();
        opt.step();
    };
    for (int i = 0; i < 3; ++i) step();   // warm-up
    StepTimes off, on;
    size_t spans_per_step = 0;
    for (int64_t r = 0; r < 2 * rounds; ++r) {
        const bool profiling = r % 2 == 1;
        if (profiling) profiler::start();
        const double w0 = bench::now_seconds(), c0 = bench::cpu_seconds();
        for (int64_t i = 0; i < steps; ++i) step();
        const double wall = (bench::now_seconds() - w0) / static_cast<double>(steps);
        const double cpu = (bench::cpu_seconds() - c0) / static_cast<double>(steps);
        if (profiling) {
            profiler::stop();
            spans_per_step = profiler::collected().size() / static_cast<size_t>(steps);
        }
        (profiling ? on : off).wall.push_back(wall);
        (profiling ? on : off).cpu.push_back(cpu);
    }
    const double off_wall = bench::median(off.wall), on_wall = bench::median(on.wall);
    std::printf("GPT %s, batch %lld: %zu spans per step\n", preset.c_str(), static_cast<long long>(batch), spans_per_step);
    std::printf("  step, profiling off: %.2f ms wall, %.2f ms CPU (median of %lld rounds of %lld steps)\n", 1e3 * off_wall,
                1e3 * bench::median(off.cpu), static_cast<long long>(rounds), static_cast<long long>(steps));
    std::printf("  step, profiling on:  %.2f ms wall, %.2f ms CPU (%+.1f%% wall)\n", 1e3 * on_wall, 1e3 * bench::median(on.cpu),
                100.0 * (on_wall - off_wall) / off_wall);
    std::printf("  spans off, estimated: %.4f ms per step (%zu spans x %.2f ns)\n",
                1e-6 * static_cast<double>(spans_per_step) * off_ns, spans_per_step, off_ns);
    return 0;
}
