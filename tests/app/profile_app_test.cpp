// profile_app_test.cpp: `ampgrad train --profile N` writes a Chrome trace of N steps after one
// warm-up step, with the spans docs/profiling.md promises properly nested on each thread's track,
// and `ampgrad trace summary` reads it back as a self-time table; two ZeRO-2 ranks' traces merge into
// one file with a process track per rank (`ampgrad trace merge`); `bench --profile` writes a trace.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "ampgrad_config.h"
#include "app/profile_run.hpp"
#include "tests/app/run_program.hpp"

using namespace ampgrad::testing;
namespace fs = std::filesystem;

namespace {

struct TraceSpan {
    std::string name, category;
    double ts, dur;
};

// The "X" events per (pid, tid) track, by start (an enclosing span before what it encloses).
std::map<std::pair<int, int>, std::vector<TraceSpan>> tracks_of(const nlohmann::json& trace) {
    std::map<std::pair<int, int>, std::vector<TraceSpan>> tracks;
    for (const nlohmann::json& e : trace.at("traceEvents")) {
        if (e.at("ph") != "X") continue;
        tracks[{e.at("pid").get<int>(), e.at("tid").get<int>()}].push_back(
            {e.at("name").get<std::string>(), e.at("cat").get<std::string>(), e.at("ts").get<double>(), e.at("dur").get<double>()});
    }
    for (auto& [track, spans] : tracks)
        std::sort(spans.begin(), spans.end(),
                  [](const TraceSpan& a, const TraceSpan& b) { return a.ts != b.ts ? a.ts < b.ts : a.dur > b.dur; });
    return tracks;
}

}  // namespace

TEST_CASE("train --profile 2: trace.json holds steps 2 and 3, nested spans of every kind, and trace summary reads it") {
    const fs::path out = make_temp_dir("profile_run");
    ProgramResult r = run_program({ampgrad_program(), "train", "--n-layer", "1", "--n-embd", "32", "--n-head", "2",
                                   "--block-size", "16", "--batch-size", "4", "--steps", "4", "--warmup", "2",
                                   "--eval-every", "0", "--eval-iters", "2", "--sample-tokens", "0", "--ckpt-every", "3",
                                   "--out", out.string(), "--profile", "2"});
    CAPTURE(r.output);
    REQUIRE(r.exit_code == 0);
    const fs::path file = out / "trace.json";
    REQUIRE(fs::exists(file));
    CHECK(r.output.find("trace: " + file.string()) != std::string::npos);
    std::ifstream in(file);
    const nlohmann::json trace = nlohmann::json::parse(in);   // throws (fails the case) if not JSON
    std::set<std::string> names, categories;
    double top_total = 0.0;
    for (const auto& [track, spans] : tracks_of(trace)) {
        CHECK(track.first == 0);   // one process, rank 0
        std::vector<const TraceSpan*> open;
        std::vector<double> self;
        for (const TraceSpan& s : spans) {
            names.insert(s.name);
            categories.insert(s.category);
            while (!open.empty() && open.back()->ts + open.back()->dur <= s.ts) open.pop_back();
            // Proper nesting: a span that starts inside another ends inside it too (1 ns of rounding slack).
            if (!open.empty()) CHECK(s.ts + s.dur <= open.back()->ts + open.back()->dur + 1e-3);
            else top_total += s.dur;
            open.push_back(&s);
        }
    }
    for (const char* name : {"step 2", "step 3", "GPT", "Block", "Linear", "LayerNorm", "gemm", "AdamW.step",
                             "BatchSampler.next", "save_safetensors"})
        CHECK_MESSAGE(names.count(name) == 1, "missing span ", name);
    CHECK(names.count("step 1") == 0);   // the warm-up step is not traced
    CHECK(names.count("step 4") == 0);
    CHECK(std::any_of(names.begin(), names.end(), [](const std::string& n) { return n.find("Backward") != std::string::npos; }));
    for (const char* cat : {"step", "module", "kernel", "backward", "optim", "data", "checkpoint"})
        CHECK_MESSAGE(categories.count(cat) == 1, "missing category ", cat);
    CHECK(top_total > 0.0);

    ProgramResult summary = run_program({ampgrad_program(), "trace", "summary", file.string(), "--top", "50"});
    CAPTURE(summary.output);
    CHECK(summary.exit_code == 0);
    for (const char* s : {"self ms", "total ms", "gemm", "step 2", "span names", "GFLOP/s"})
        CHECK(summary.output.find(s) != std::string::npos);

    // Grouped by input shape: a gemm row per operand list, each with its rate; the same spans in all.
    const std::vector<ampgrad::app::SpanSummary> by_name = ampgrad::app::summarize_trace(file.string());
    const std::vector<ampgrad::app::SpanSummary> by_shape = ampgrad::app::summarize_trace(file.string(), /*group_by_input_shape=*/true);
    auto count_of = [](const std::vector<ampgrad::app::SpanSummary>& rows, const std::string& name, size_t* row_count) {
        int64_t calls = 0;
        for (const ampgrad::app::SpanSummary& r : rows)
            if (r.name == name) calls += r.count, ++*row_count;
        return calls;
    };
    size_t name_rows = 0, shape_rows = 0;
    CHECK(count_of(by_name, "gemm", &name_rows) == count_of(by_shape, "gemm", &shape_rows));
    CHECK(name_rows == 1);
    CHECK(shape_rows > 1);   // the model's Linears and attention products have several shapes
    for (const ampgrad::app::SpanSummary& r : by_shape)
        if (r.name == "gemm") {
            CAPTURE(r.input_shapes);
            CHECK(r.flops > 0.0);
            CHECK(r.input_shapes.find("f32 cpu") != std::string::npos);
        }
    ProgramResult grouped = run_program({ampgrad_program(), "trace", "summary", file.string(), "--group-by-input-shape"});
    CAPTURE(grouped.output);
    CHECK(grouped.exit_code == 0);
    CHECK(grouped.output.find("f32 cpu") != std::string::npos);
    fs::remove_all(out);
}

TEST_CASE("trace summary: a file that is not a trace is a typed error naming it") {
    const fs::path dir = make_temp_dir("trace_bad");
    std::ofstream(dir / "not.json") << "{\"a\": 1}";
    ProgramResult r = run_program({ampgrad_program(), "trace", "summary", (dir / "not.json").string()});
    CAPTURE(r.output);
    CHECK(r.exit_code > 0);
    CHECK(r.signal == 0);
    CHECK(r.output.find("has no \"traceEvents\" list") != std::string::npos);
    fs::remove_all(dir);
}

TEST_CASE("train --zero 2 --prec fp16-master on 2 ranks --profile 1, trace merge: one process track per rank" *
          doctest::skip(!AMPGRAD_WITH_GLOO)) {
    const fs::path out = make_temp_dir("profile_zero2");
    ProgramResult r = run_program({ampgrad_run_program(), "--nproc-per-node", "2", "--master-port",
                                   std::to_string(free_port()), ampgrad_program(), "train", "--zero", "2", "--prec",
                                   "fp16-master", "--init-scale", "1024", "--n-layer", "1", "--n-embd", "32", "--n-head",
                                   "2", "--block-size", "16", "--batch-size", "4", "--steps", "3", "--warmup", "1",
                                   "--eval-every", "0", "--eval-iters", "1", "--sample-tokens", "0", "--profile", "1",
                                   "--out", out.string()}, {"OMP_NUM_THREADS=1"});
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    const fs::path merged = out / "merged.json";
    ProgramResult m = run_program({ampgrad_program(), "trace", "merge", out.string(), "--out", merged.string()});
    REQUIRE_MESSAGE(m.exit_code == 0, m.output);
    CHECK(m.output.find("merged 2 trace(s)") != std::string::npos);
    std::ifstream in(merged);
    const nlohmann::json trace = nlohmann::json::parse(in);
    std::map<int, std::set<std::string>> categories_of_rank;
    int64_t gemm_flops = 0;
    for (const auto& [track, spans] : tracks_of(trace))
        for (const TraceSpan& s : spans) categories_of_rank[track.first].insert(s.category);
    for (const nlohmann::json& e : trace.at("traceEvents"))
        if (e.at("ph") == "X" && e.at("name") == "gemm") gemm_flops += e.at("args").at("flops").get<int64_t>();
    REQUIRE(categories_of_rank.size() == 2);   // pid 0 and pid 1
    for (const auto& [rank, categories] : categories_of_rank)
        for (const char* cat : {"step", "module", "kernel", "backward", "zero", "collective"})
            CHECK_MESSAGE(categories.count(cat) == 1, "rank ", rank, " lacks category ", cat);
    CHECK(gemm_flops > 0);
    // The same rank twice is refused, naming both files.
    ProgramResult twice = run_program({ampgrad_program(), "trace", "merge", (out / "trace.json").string(),
                                       (out / "trace.json").string(), "--out", (out / "twice.json").string()});
    CHECK(twice.exit_code == 1);
    CHECK(twice.output.find("both hold spans of process track 0") != std::string::npos);
    fs::remove_all(out);
}

TEST_CASE("bench --profile 1 writes a trace of one more step and reports what tracing cost") {
    const fs::path out = make_temp_dir("bench_profile");
    ProgramResult r = run_program({ampgrad_program(), "bench", "--n-layer", "1", "--n-embd", "32", "--n-head", "2",
                                   "--block-size", "16", "--batch-size", "4", "--warmup-steps", "1", "--timed-steps", "1",
                                   "--profile", "1", "--profile-out", out.string()});
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    CHECK(r.output.find("profiled 1 steps") != std::string::npos);
    CHECK(fs::exists(out / "trace.json"));
    fs::remove_all(out);
}
