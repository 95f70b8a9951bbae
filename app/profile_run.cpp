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
void add_track(std::vector<const nlohmann::json*>& spans, std::map<std::string, SpanSummary>& by_name) {
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
        SpanSummary& row = by_name[name];
        row.name = name;
        row.category = spans[i]->value("cat", "");
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

std::vector<SpanSummary> summarize_trace(const std::string& path) {
    const nlohmann::json trace = read_chrome_trace(path, "trace summary");
    std::map<std::pair<int64_t, int64_t>, std::vector<const nlohmann::json*>> tracks;
    for (const nlohmann::json& e : trace["traceEvents"]) {
        if (e.value("ph", "") != "X" || !e.contains("ts") || !e.contains("dur") || !e.contains("name")) continue;
        tracks[{e.value("pid", int64_t{0}), e.value("tid", int64_t{0})}].push_back(&e);
    }
    std::map<std::string, SpanSummary> by_name;
    for (auto& [track, spans] : tracks) add_track(spans, by_name);
    std::vector<SpanSummary> rows;
    for (auto& [name, row] : by_name) rows.push_back(row);
    std::sort(rows.begin(), rows.end(), [](const SpanSummary& a, const SpanSummary& b) { return a.self_us > b.self_us; });
    return rows;
}

std::string format_summary(const std::vector<SpanSummary>& rows, size_t top) {
    double all_self = 0.0;
    for (const SpanSummary& r : rows) all_self += r.self_us;
    std::string out = fmt::format("{:<36} {:<10} {:>7} {:>12} {:>7} {:>12} {:>11}\n", "name", "category", "calls",
                                  "self ms", "self %", "total ms", "avg us");
    for (size_t i = 0; i < std::min(top, rows.size()); ++i) {
        const SpanSummary& r = rows[i];
        const std::string name = r.name.size() > 36 ? r.name.substr(0, 33) + "..." : r.name;
        out += fmt::format("{:<36} {:<10} {:>7} {:>12.3f} {:>6.1f}% {:>12.3f} {:>11.1f}\n", name, r.category, r.count,
                           1e-3 * r.self_us, all_self > 0 ? 100.0 * r.self_us / all_self : 0.0, 1e-3 * r.total_us,
                           r.total_us / static_cast<double>(r.count));
    }
    out += fmt::format("{} span names, {:.3f} ms of self time in all\n", rows.size(), 1e-3 * all_self);
    return out;
}

int run_trace_summary(const std::string& path, int64_t top) {
    std::fputs(format_summary(summarize_trace(path), static_cast<size_t>(std::max<int64_t>(top, 1))).c_str(), stdout);
    return 0;
}

}  // namespace ampgrad::app
