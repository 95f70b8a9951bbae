// profiler_test.cpp: core/profiler.hpp: spans off cost nothing observable (nothing recorded, the
// args never built), spans on nest and land on their thread's track, the kernel registry's dispatch
// span names the kernel, device and operands, and the Chrome trace is valid JSON with the Trace
// Event Format's fields. Timing (the cost with profiling off) belongs to bench/, not here.
#include <doctest/doctest.h>

#include <thread>

#include <nlohmann/json.hpp>

#include "ampgrad/ampgrad.h"
#include "core/profiler.hpp"

using namespace ampgrad;

namespace {

// Stops the profiler however the test case ends, so other cases run with it off.
struct ProfilerSession {
    ProfilerSession() { profiler::start(); }
    ~ProfilerSession() { profiler::stop(); }
};

const profiler::SpanEvent* find_span(const std::vector<profiler::SpanEvent>& spans, const std::string& name) {
    for (const auto& s : spans)
        if (s.name == name) return &s;
    return nullptr;
}

}  // namespace

TEST_CASE("profiler: off, a span records nothing and never builds its args") {
    profiler::start();
    profiler::stop();
    REQUIRE_FALSE(profiler::enabled());
    bool built = false;
    {
        profiler::Span span("test", "off", [&] {
            built = true;
            return std::string("{}");
        });
    }
    CHECK_FALSE(built);
    CHECK(profiler::collected().empty());
}

TEST_CASE("profiler: on, spans nest: the inner one lies within the outer one on the same thread") {
    ProfilerSession session;
    {
        profiler::Span outer("test", "outer", [] { return std::string(R"({"k": 1})"); });
        profiler::Span inner("test", "inner");
    }
    profiler::stop();
    const std::vector<profiler::SpanEvent> spans = profiler::collected();
    const profiler::SpanEvent* outer = find_span(spans, "outer");
    const profiler::SpanEvent* inner = find_span(spans, "inner");
    REQUIRE(outer != nullptr);
    REQUIRE(inner != nullptr);
    CHECK(outer->thread == inner->thread);
    CHECK(outer->args == R"({"k": 1})");
    CHECK(inner->start_ns >= outer->start_ns);
    CHECK(inner->start_ns + inner->duration_ns <= outer->start_ns + outer->duration_ns);
    CHECK(&spans.front() == outer);   // collected() orders by start, an enclosing span first
}

TEST_CASE("profiler: each thread has its own track") {
    ProfilerSession session;
    { profiler::Span here("test", "main thread"); }
    std::thread other([] { profiler::Span there("test", "other thread"); });
    other.join();
    profiler::stop();
    const std::vector<profiler::SpanEvent> spans = profiler::collected();
    REQUIRE(find_span(spans, "main thread") != nullptr);
    REQUIRE(find_span(spans, "other thread") != nullptr);
    CHECK(find_span(spans, "main thread")->thread != find_span(spans, "other thread")->thread);
}

TEST_CASE("profiler: a kernel call is a span naming the kernel, its device and its operands") {
    Tensor a = ones({2, 3}), b = ones({3, 4});
    ProfilerSession session;
    Tensor c = matmul(a, b);   // (2,4)
    profiler::stop();
    const std::vector<profiler::SpanEvent> spans = profiler::collected();
    const profiler::SpanEvent* gemm = find_span(spans, "gemm");
    REQUIRE(gemm != nullptr);
    CHECK(gemm->category == "kernel");
    const nlohmann::json args = nlohmann::json::parse(gemm->args);
    CHECK(args.at("device") == "cpu");
    CHECK(args.at("operands").size() == 3);
    CHECK(args.at("operands")[0].get<std::string>().find("(2,4) f32") != std::string::npos);
    CHECK(args.at("bytes") == (8 + 6 + 12) * 4);   // out, a, b in f32
    CHECK(args.at("flops") == 2 * 2 * 4 * 3);      // 2 M N K
}

TEST_CASE("profiler: FLOPs of GEMMs (batched, broadcast, transposed) and attention; none for other kernels") {
    Tensor out = make_empty({5, 2, 4}, kFloat32, Device("cpu")), b = make_empty({5, 3, 4}, kFloat32, Device("cpu"));
    CHECK(detail::kernel_flops("gemm", {out, make_empty({5, 2, 3}, kFloat32, Device("cpu")), b}) == 2 * 40 * 3);
    CHECK(detail::kernel_flops("gemm", {out, make_empty({3, 2}, kFloat32, Device("cpu")), b}) == 2 * 40 * 3);   // a^T, broadcast
    CHECK(detail::kernel_flops("gemm_epilogue", {out, Tensor(), make_empty({5, 2, 3}, kFloat32, Device("cpu")), b}) ==
          2 * 40 * 3);   // no aux
    Tensor q = make_empty({2, 4, 8, 16}, kFloat32, Device("cpu")), kv = make_empty({2, 2, 8, 16}, kFloat32, Device("cpu"));
    const int64_t pairs = 2 * 4 * 8 * 8;   // B NH T S
    CHECK(detail::kernel_flops("attention_forward", {q, Tensor(), q, kv, kv}) == 2 * pairs * (16 + 16));
    CHECK(detail::kernel_flops("attention_backward", {q, kv, kv, q, q, Tensor(), q, kv, kv}) == 2 * pairs * (3 * 16 + 2 * 16));
    CHECK(detail::kernel_flops("softmax", {out, out}) == -1);
    CHECK(detail::kernel_flops("gemm", {out}) == -1);   // too few operands: unknown, not a crash
}

TEST_CASE("profiler: autocast casts are spans, and a cast-cache hit is its own span") {
    Tensor w = ones({4, 4}).requires_grad_(true), x = ones({2, 4});
    ProfilerSession session;
    {
        amp::AutocastGuard autocast(kCPU, kBFloat16);
        Tensor y1 = linear(x, w);   // casts x and w (w into the cache)
        Tensor y2 = linear(x, w);   // casts x again; w from the cache
    }
    profiler::stop();
    const std::vector<profiler::SpanEvent> spans = profiler::collected();
    int casts = 0, hits = 0;
    for (const profiler::SpanEvent& s : spans) {
        if (s.category != "autocast") continue;
        const nlohmann::json args = nlohmann::json::parse(s.args);
        CHECK(args.at("op") == "linear");
        CHECK(args.at("to") == "bf16");
        casts += s.name == "autocast.cast";
        hits += s.name == "autocast.cache_hit";
    }
    CHECK(casts == 3);
    CHECK(hits == 1);
}

TEST_CASE("profiler: the Chrome trace is JSON in the Trace Event Format, with a process track named by rank") {
    ProfilerSession session;
    {
        profiler::Span outer("test", "with \"quotes\"\n");
        profiler::Span inner("test", "inner");
    }
    profiler::stop();
    const nlohmann::json trace = nlohmann::json::parse(profiler::chrome_trace_json(profiler::collected(), 3));
    REQUIRE(trace.at("traceEvents").is_array());
    CHECK(trace.at("displayTimeUnit") == "ms");
    int spans = 0;
    bool process_named = false;
    for (const nlohmann::json& e : trace["traceEvents"]) {
        CHECK(e.at("pid") == 3);
        if (e.at("ph") == "M" && e.at("name") == "process_name") process_named = e["args"]["name"] == "rank 3";
        if (e.at("ph") != "X") continue;
        ++spans;
        for (const char* key : {"name", "cat", "ts", "dur", "tid", "args"}) CHECK(e.contains(key));
        CHECK(e["ts"].get<double>() >= 0.0);
        CHECK(e["dur"].get<double>() >= 0.0);
    }
    CHECK(spans == 2);
    CHECK(process_named);
    CHECK(trace["traceEvents"].dump().find(R"(with \"quotes\"\n)") != std::string::npos);
}
