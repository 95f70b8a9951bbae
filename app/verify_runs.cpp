// verify_runs.cpp: the comparisons behind `ampgrad verify` (see verify_runs.hpp): bits, not
// tolerances. Two values are equal only when their bytes are; the ulps are there to tell a rounding
// difference (a few ulps) from a real divergence.
#include "app/verify_runs.hpp"

#include <cstring>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/json_file.hpp"

namespace ampgrad::app {
namespace {

// Sign-magnitude bits (every IEEE-style float format) -> a line where adjacent values are 1 apart.
uint64_t float_ulps(uint64_t bits_a, uint64_t bits_b, int width) {
    const uint64_t sign = uint64_t{1} << (width - 1);
    const uint64_t mag_a = bits_a & (sign - 1), mag_b = bits_b & (sign - 1);
    if ((bits_a & sign) == (bits_b & sign)) return mag_a > mag_b ? mag_a - mag_b : mag_b - mag_a;
    return mag_a + mag_b;   // across zero: both magnitudes (< 2^63 each, so no overflow)
}

template <typename Bits>
uint64_t load_bits(const void* p) {
    Bits b;
    std::memcpy(&b, p, sizeof(Bits));
    return b;
}

template <typename Int>
uint64_t int_distance(const void* a, const void* b) {
    Int x, y;
    std::memcpy(&x, a, sizeof(Int));
    std::memcpy(&y, b, sizeof(Int));
    return x > y ? static_cast<uint64_t>(x) - static_cast<uint64_t>(y) : static_cast<uint64_t>(y) - static_cast<uint64_t>(x);
}

std::vector<int64_t> coordinates(int64_t flat, const std::vector<int64_t>& shape) {
    std::vector<int64_t> index(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
        index[d] = shape[d] ? flat % shape[d] : 0;
        flat = shape[d] ? flat / shape[d] : 0;
    }
    return index;
}

std::vector<int64_t> shape_of(const Tensor& t) { return std::vector<int64_t>(t.sizes().begin(), t.sizes().end()); }

// ---- metrics.jsonl ----

// Timings, memory figures (`*_bytes`: the allocator's high-water mark) and the layout itself (world
// size, stage, the accumulation split, memory per rank) legitimately differ between layouts; every
// other field is a result of the training.
bool is_result_field(const std::string& key) {
    auto ends_with = [&](const char* suffix) {
        const size_t n = std::strlen(suffix);
        return key.size() >= n && key.compare(key.size() - n, n, suffix) == 0;
    };
    if (key == "kind" || key == "step" || ends_with("_ms") || ends_with("_s") || ends_with("_bytes")) return false;
    for (const char* layout : {"mfu", "world_size", "zero_stage", "model_state_bytes_per_rank", "grad_accum"})
        if (key == layout) return false;
    return true;
}

using MetricRecords = std::map<std::pair<int64_t, std::string>, nlohmann::json>;   // (step, kind) -> record

MetricRecords read_metrics(const std::string& run_dir) {
    MetricRecords records;
    std::ifstream in(run_dir + "/metrics.jsonl");
    if (!in) return records;   // a checkpoints-only folder: nothing to compare
    std::string line;
    for (int64_t line_number = 1; std::getline(in, line); ++line_number) {
        if (line.empty()) continue;
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_discarded() || !j.is_object() || !j.contains("step"))
            throw FormatError(fmt::format("verify: {}/metrics.jsonl line {} is not a metrics record", run_dir, line_number));
        std::pair<int64_t, std::string> key = with_json_errors(
            "verify", fmt::format("{}/metrics.jsonl line {}", run_dir, line_number),
            [&] { return std::pair<int64_t, std::string>{j["step"].get<int64_t>(), j.value("kind", "train")}; });
        records[std::move(key)] = std::move(j);
    }
    return records;
}

// A float result written as a double (the loss) is measured in f32 ulps, also against a value one
// layout computed in double (another run's grad norm); two doubles in f64 ulps.
void set_metric_ulps(double a, double b, MetricDifference& d) {
    const float fa = static_cast<float>(a), fb = static_cast<float>(b);
    const bool as_f32 = static_cast<double>(fa) == a || static_cast<double>(fb) == b;
    d.ulp_dtype = as_f32 ? "f32" : "f64";
    d.ulps = as_f32 ? float_ulps(load_bits<uint32_t>(&fa), load_bits<uint32_t>(&fb), 32)
                    : float_ulps(load_bits<uint64_t>(&a), load_bits<uint64_t>(&b), 64);
}

bool same_value(const nlohmann::json& a, const nlohmann::json& b) {
    if (a.is_number() && b.is_number()) {
        const double x = a.get<double>(), y = b.get<double>();
        return std::memcmp(&x, &y, sizeof x) == 0;
    }
    return a == b;
}

std::optional<MetricDifference> first_field_difference(const nlohmann::json& a, const nlohmann::json& b) {
    for (const auto& [key, value] : a.items()) {
        if (!is_result_field(key) || !b.contains(key) || same_value(value, b[key])) continue;
        MetricDifference d{a["step"].get<int64_t>(), a.value("kind", "train"), key, value.dump(), b[key].dump()};
        if (value.is_number() && b[key].is_number()) set_metric_ulps(value.get<double>(), b[key].get<double>(), d);
        return d;
    }
    return std::nullopt;
}

void compare_metrics(const std::string& run_a, const std::string& run_b, VerifyReport& report) {
    const MetricRecords a = read_metrics(run_a), b = read_metrics(run_b);
    for (const auto& [key, record] : a) {
        auto other = b.find(key);
        if (other == b.end()) continue;
        if (report.metric_records_compared++ == 0) report.first_metric_step = key.first;
        report.last_metric_step = key.first;
        if (!report.first_metric_difference) report.first_metric_difference = first_field_difference(record, other->second);
    }
}

// ---- checkpoints ----

// A layout that keeps f32 masters of f32 weights (ZeRO does) holds master/X where the other has only
// param/X: the two must then be the same bits, so param/X stands in for the missing master.
std::string stand_in(const std::string& name, const Tensor& t, const CanonicalState& others) {
    if (name.rfind("master/", 0) != 0) return name;
    auto param = others.find("param/" + name.substr(7));
    return param != others.end() && param->second.dtype() == t.dtype() ? param->first : name;
}

CheckpointComparison compare_checkpoint(int64_t step, const std::string& dir_a, const std::string& dir_b) {
    const CanonicalState a = read_canonical_state(dir_a), b = read_canonical_state(dir_b);
    CheckpointComparison c{step, 0, {}};
    auto compare_one = [&](const std::string& name, const Tensor& mine, const CanonicalState& others, const char* side) {
        ++c.tensors_compared;
        auto other = others.find(name);
        if (other == others.end()) other = others.find(stand_in(name, mine, others));
        if (other == others.end()) c.differences.push_back(TensorDifference{name, side});
        else if (auto d = compare_tensors(name, mine, other->second)) c.differences.push_back(std::move(*d));
    };
    for (const auto& [name, ta] : a) compare_one(name, ta, b, "only in A");
    for (const auto& [name, tb] : b)
        if (!a.count(name)) compare_one(name, tb, a, "only in B");
    return c;
}

void compare_checkpoints(const std::string& run_a, const std::string& run_b, VerifyReport& report) {
    const auto a = list_checkpoints(run_a), b = list_checkpoints(run_b);
    for (const auto& [step, dir] : a) {
        auto other = b.find(step);
        if (other == b.end()) report.checkpoint_steps_only_in_a.push_back(step);
        else report.checkpoints.push_back(compare_checkpoint(step, dir, other->second));
    }
    for (const auto& [step, dir] : b)
        if (!a.count(step)) report.checkpoint_steps_only_in_b.push_back(step);
}

std::string describe(const TensorDifference& d) {
    if (!d.problem.empty()) return fmt::format("{}: {}", d.name, d.problem);
    auto plural = [](uint64_t n, const char* one, const char* many) { return n == 1 ? one : many; };
    return fmt::format("{}[{}]: {:.9g} vs {:.9g} ({} {}); {} {}, at most {} {}", d.name, fmt::join(d.first_index, ", "),
                       d.a, d.b, d.ulps, plural(d.ulps, "ulp", "ulps"), d.elements_differing,
                       plural(d.elements_differing, "element differs", "elements differ"), d.max_ulps,
                       plural(d.max_ulps, "ulp", "ulps"));
}

}  // namespace

uint64_t ulps_between(const void* a, const void* b, DType dtype) {
    switch (dtype) {
        case kFloat64: return float_ulps(load_bits<uint64_t>(a), load_bits<uint64_t>(b), 64);
        case kFloat32: return float_ulps(load_bits<uint32_t>(a), load_bits<uint32_t>(b), 32);
        case kFloat16:
        case kBFloat16: return float_ulps(load_bits<uint16_t>(a), load_bits<uint16_t>(b), 16);
        case kFloat8_e4m3fn:
        case kFloat8_e5m2: return float_ulps(load_bits<uint8_t>(a), load_bits<uint8_t>(b), 8);
        case kInt64: return int_distance<int64_t>(a, b);
        case kInt32: return int_distance<int32_t>(a, b);
        case kBool:
        case kUInt8: return int_distance<uint8_t>(a, b);
    }
    throw InternalError(fmt::format("verify: ulps_between has no rule for dtype {}", dtype_name(dtype)));
}

std::optional<TensorDifference> compare_tensors(const std::string& name, const Tensor& a, const Tensor& b) {
    if (a.dtype() != b.dtype() || shape_of(a) != shape_of(b))
        return TensorDifference{name, fmt::format("A is {} ({}), B is {} ({})", dtype_name(a.dtype()),
                                                  fmt::join(shape_of(a), ", "), dtype_name(b.dtype()),
                                                  fmt::join(shape_of(b), ", "))};
    const Tensor ca = a.contiguous(), cb = b.contiguous();
    const auto* pa = static_cast<const unsigned char*>(ca.raw_data());
    const auto* pb = static_cast<const unsigned char*>(cb.raw_data());
    const size_t size = ca.element_size();
    std::optional<TensorDifference> d;
    for (int64_t i = 0; i < ca.numel(); ++i) {
        if (std::memcmp(pa + i * size, pb + i * size, size) == 0) continue;
        const uint64_t ulps = ulps_between(pa + i * size, pb + i * size, ca.dtype());
        if (!d) {
            d = TensorDifference{name, "", coordinates(i, shape_of(ca)), 0, 0, ulps, 0, 0};
            d->a = ca.to(kFloat64).data_ptr<double>()[i];   // contiguous, so element i is flat index i
            d->b = cb.to(kFloat64).data_ptr<double>()[i];
        }
        ++d->elements_differing;
        d->max_ulps = std::max(d->max_ulps, ulps);
    }
    return d;
}

bool VerifyReport::identical() const {
    if (first_metric_difference) return false;
    for (const auto& c : checkpoints)
        if (!c.differences.empty()) return false;
    return true;
}

VerifyReport verify_runs(const std::string& run_a, const std::string& run_b) {
    VerifyReport report;
    compare_metrics(run_a, run_b, report);
    compare_checkpoints(run_a, run_b, report);
    if (report.metric_records_compared == 0 && report.checkpoints.empty())
        throw ValueError(fmt::format("verify: '{}' and '{}' share no metrics record and no checkpoint step", run_a, run_b));
    return report;
}

std::string format_verify_report(const VerifyReport& r, const std::string& run_a, const std::string& run_b) {
    std::string out = fmt::format("verify: A = {}\n        B = {}\n", run_a, run_b);
    if (r.metric_records_compared == 0) out += "metrics: no records in common\n";
    else if (!r.first_metric_difference)
        out += fmt::format("metrics: {} records compared (steps {}..{}): identical\n", r.metric_records_compared,
                           r.first_metric_step, r.last_metric_step);
    else {
        const MetricDifference& m = *r.first_metric_difference;
        out += fmt::format("metrics: DIFFERENT from step {}: {} {}: {} vs {}", m.step, m.kind, m.field, m.a, m.b);
        out += m.ulp_dtype.empty() ? "\n" : fmt::format(" ({} {} ulps)\n", m.ulps, m.ulp_dtype);
    }
    for (const auto& c : r.checkpoints) {
        if (c.differences.empty()) {
            out += fmt::format("step {}: {} tensors identical\n", c.step, c.tensors_compared);
            continue;
        }
        out += fmt::format("step {}: DIFFERENT: {} of {} tensors differ; first {}\n", c.step, c.differences.size(),
                           c.tensors_compared, describe(c.differences.front()));
        for (size_t i = 1; i < c.differences.size() && i < 8; ++i) out += "    " + describe(c.differences[i]) + "\n";
        if (c.differences.size() > 8) out += fmt::format("    ... and {} more\n", c.differences.size() - 8);
    }
    if (!r.checkpoint_steps_only_in_a.empty() || !r.checkpoint_steps_only_in_b.empty())
        out += fmt::format("checkpoints not compared: only in A steps [{}], only in B steps [{}]\n",
                           fmt::join(r.checkpoint_steps_only_in_a, ", "), fmt::join(r.checkpoint_steps_only_in_b, ", "));
    out += r.identical() ? "IDENTICAL\n" : "DIFFERENT\n";
    return out;
}

int run_verify(const std::string& run_a, const std::string& run_b) {
    const VerifyReport report = verify_runs(run_a, run_b);
    fmt::print("{}", format_verify_report(report, run_a, run_b));
    return report.identical() ? 0 : 1;
}

}  // namespace ampgrad::app
