// profile_run.cpp: --profile's step window and `ampgrad trace summary` (app/profile_run.hpp).
#include "app/profile_run.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace ampgrad::app {

namespace fs = std::filesystem;

StepProfiler::StepProfiler(int64_t steps, int64_t first_step, const std::string& out_dir, int rank) : rank_(rank) {
    if (steps <= 0) return;
    first_traced_ = first_step + 2;   // one untraced warm-up step
    last_traced_ = first_step + 1 + steps;
    path_ = (fs::path(out_dir) / (rank == 0 ? std::string("trace.json") : fmt::format("trace.rank{}.json", rank))).string();
}

void StepProfiler::before_step(int64_t step) {
    if (step < first_traced_ || step > last_traced_) return;
    if (!running_) {
        profiler::start();
        running_ = true;
    }
    step_span_.emplace("step", fmt::format("step {}", step));
}

void StepProfiler::after_step(int64_t step) {
    if (!running_) return;
    step_span_.reset();   // ends the step's span
    if (step >= last_traced_) write();
}

void StepProfiler::finish() {
    if (running_) write();
}

void StepProfiler::write() {
    step_span_.reset();
    profiler::stop();
    running_ = false;
    profiler::write_chrome_trace(path_, rank_);
    written_ = path_;
}

namespace {

// Self time per span: on each (pid, tid) track, a span's children are the spans that start inside
// it and are not inside one of its other children.
// The operands a kernel span records ("args": {"operands": [...]}), joined; empty for other spans.
std::string input_shapes_of(const nlohmann::json& span) {
    const auto args = span.find("args");
    if (args == span.end() || !args->is_object() || !args->contains("operands") || !(*args)["operands"].is_array()) return "";
    std::string out;
    for (const nlohmann::json& o : (*args)["operands"])
        if (o.is_string()) out += (out.empty() ? "" : ", ") + o.get<std::string>();
    return out;
}

double flops_of(const nlohmann::json& span) {
    const auto args = span.find("args");
    if (args == span.end() || !args->is_object() || !args->contains("flops") || !(*args)["flops"].is_number()) return 0.0;
    return (*args)["flops"].get<double>();
}

// A complete span ("ph": "X") whose fields have the types the summary reads. Other events (and
// spans another tool wrote with other types) are not summarised.
bool is_complete_span(const nlohmann::json& e) {
    auto optional_integer = [&](const char* key) { return !e.contains(key) || e[key].is_number_integer(); };
    auto optional_string = [&](const char* key) { return !e.contains(key) || e[key].is_string(); };
    return e.is_object() && e.contains("ph") && e["ph"] == "X" && e.contains("ts") && e["ts"].is_number() &&
           e.contains("dur") && e["dur"].is_number() && e.contains("name") && e["name"].is_string() &&
           optional_integer("pid") && optional_integer("tid") && optional_string("cat");
}

void add_track(std::vector<const nlohmann::json*>& spans, bool group_by_input_shape,
               std::map<std::string, SpanSummary>& by_name) {
    std::sort(spans.begin(), spans.end(), [](const nlohmann::json* a, const nlohmann::json* b) {
        const double ta = a->at("ts").get<double>(), tb = b->at("ts").get<double>();
        return ta != tb ? ta < tb : a->at("dur").get<double>() > b->at("dur").get<double>();
    });
    std::vector<double> self(spans.size());
    std::vector<std::pair<double, size_t>> stack;   // (end, index) of the enclosing spans
    for (size_t i = 0; i < spans.size(); ++i) {
        const double ts = spans[i]->at("ts").get<double>(), dur = spans[i]->at("dur").get<double>();
        while (!stack.empty() && stack.back().first <= ts) stack.pop_back();
        if (!stack.empty()) self[stack.back().second] -= dur;
        self[i] = dur;
        stack.emplace_back(ts + dur, i);
    }
    for (size_t i = 0; i < spans.size(); ++i) {
        const std::string name = spans[i]->at("name").get<std::string>();
        const std::string shapes = group_by_input_shape ? input_shapes_of(*spans[i]) : "";
        SpanSummary& row = by_name[shapes.empty() ? name : name + "\n" + shapes];
        row.name = name;
        row.input_shapes = shapes;
        row.category = spans[i]->value("cat", "");
        row.flops += flops_of(*spans[i]);
        row.count += 1;
        row.total_us += spans[i]->at("dur").get<double>();
        row.self_us += self[i];
    }
}

}  // namespace

nlohmann::json read_chrome_trace(const std::string& path, const std::string& command) {
    std::ifstream in(path);
    if (!in) throw IOError(fmt::format("{}: cannot read {}", command, path));
    nlohmann::json trace;
    try {
        trace = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception& e) {
        throw FormatError(fmt::format("{}: {} is not JSON: {}", command, path, e.what()));
    }
    if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
        throw FormatError(fmt::format("{}: {} has no \"traceEvents\" list (not a Chrome trace)", command, path));
    return trace;
}

std::vector<SpanSummary> summarize_trace(const std::string& path, bool group_by_input_shape) {
    const nlohmann::json trace = read_chrome_trace(path, "trace summary");
    std::map<std::pair<int64_t, int64_t>, std::vector<const nlohmann::json*>> tracks;
    for (const nlohmann::json& e : trace["traceEvents"]) {
        if (!is_complete_span(e)) continue;
        tracks[{e.value("pid", int64_t{0}), e.value("tid", int64_t{0})}].push_back(&e);
    }
    std::map<std::string, SpanSummary> by_name;
    for (auto& [track, spans] : tracks) add_track(spans, group_by_input_shape, by_name);
    std::vector<SpanSummary> rows;
    for (auto& [name, row] : by_name) rows.push_back(row);
    std::sort(rows.begin(), rows.end(), [](const SpanSummary& a, const SpanSummary& b) { return a.self_us > b.self_us; });
    return rows;
}

// GFLOP/s is the rows' FLOPs over their total time ("-" where no span of the row knows its FLOPs); the
// input shapes, when grouped by them, close the line.
std::string format_summary(const std::vector<SpanSummary>& rows, size_t top) {
    double all_self = 0.0;
    for (const SpanSummary& r : rows) all_self += r.self_us;
    std::string out = fmt::format("{:<36} {:<10} {:>7} {:>12} {:>7} {:>12} {:>11} {:>9}\n", "name", "category", "calls",
                                  "self ms", "self %", "total ms", "avg us", "GFLOP/s");
    for (size_t i = 0; i < std::min(top, rows.size()); ++i) {
        const SpanSummary& r = rows[i];
        const std::string name = r.name.size() > 36 ? r.name.substr(0, 33) + "..." : r.name;
        const std::string rate = r.flops > 0.0 && r.total_us > 0.0 ? fmt::format("{:.1f}", 1e-3 * r.flops / r.total_us) : "-";
        out += fmt::format("{:<36} {:<10} {:>7} {:>12.3f} {:>6.1f}% {:>12.3f} {:>11.1f} {:>9}", name, r.category, r.count,
                           1e-3 * r.self_us, all_self > 0 ? 100.0 * r.self_us / all_self : 0.0, 1e-3 * r.total_us,
                           r.total_us / static_cast<double>(r.count), rate);
        out += r.input_shapes.empty() ? "\n" : "  " + r.input_shapes + "\n";
    }
    out += fmt::format("{} span names, {:.3f} ms of self time in all\n", rows.size(), 1e-3 * all_self);
    return out;
}

int run_trace_summary(const std::string& path, int64_t top, bool group_by_input_shape) {
    std::fputs(format_summary(summarize_trace(path, group_by_input_shape), static_cast<size_t>(std::max<int64_t>(top, 1))).c_str(),
               stdout);
    return 0;
}

}  // namespace ampgrad::app
