// verify_runs.hpp: `ampgrad verify RUN_A RUN_B`: do two runs hold the same bits? It compares
//   - metrics.jsonl: every result field of the records the two runs share (loss, grad_norm, lr,
//     scale, skipped, eval losses, ...), step by step; timings and layout facts (world size, ZeRO
//     stage, accumulation split, memory) are not results and are left out;
//   - the checkpoints of the steps both runs saved, tensor by tensor, in layout-free names
//     (app/run_states.hpp), so a one-process run can be checked against a ZeRO run on 4 ranks;
// and names the first step and the first tensor (and element) where they differ, with the distance
// in units in the last place (ulps) of the saved dtype. Exit status: 0 identical, 1 different.
//
//   ampgrad verify runs/one-process runs/four-ranks-zero3
//   metrics: 20 steps compared (1..20): identical
//   step 10: 126 tensors identical
//   step 20: DIFFERENT: param/transformer.h.0.attn.c_attn.weight[3, 17]: 0.0123 vs 0.012300001 (1 ulp) ...
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "app/run_states.hpp"

namespace ampgrad::app {

// Units in the last place between two values of the same floating dtype (f64, f32, f16, bf16,
// fp8), counted along the ordered line of representable values: adjacent values are 1 apart,
// +0 and -0 are 0 apart (their bits still differ). Integers: the absolute difference.
uint64_t ulps_between(const void* a, const void* b, DType dtype);

// Where two tensors of one name first differ.
struct TensorDifference {
    std::string name;
    std::string problem;              // set when they cannot be compared element-wise ("only in A", a shape)
    std::vector<int64_t> first_index; // coordinates of the first differing element
    double a = 0, b = 0;              // its two values
    uint64_t ulps = 0, max_ulps = 0;  // at the first element; the largest over the tensor
    int64_t elements_differing = 0;
};

// nullopt when the two are bit-identical (same dtype, shape and bytes).
std::optional<TensorDifference> compare_tensors(const std::string& name, const Tensor& a, const Tensor& b);

struct MetricDifference {
    int64_t step = 0;
    std::string kind, field;          // e.g. "train", "loss"
    std::string a, b;                 // the two values as JSON text ("missing" when one lacks it)
    uint64_t ulps = 0;                // numbers: f32 ulps when either is an f32 value, else f64 ulps
    std::string ulp_dtype;            // "f32" or "f64" ("" when the values are not numbers)
};

struct CheckpointComparison {
    int64_t step = 0;
    int64_t tensors_compared = 0;
    std::vector<TensorDifference> differences;   // in name order
};

struct VerifyReport {
    int64_t metric_records_compared = 0, first_metric_step = 0, last_metric_step = 0;
    std::optional<MetricDifference> first_metric_difference;
    std::vector<CheckpointComparison> checkpoints;   // the steps both saved, in order
    std::vector<int64_t> checkpoint_steps_only_in_a, checkpoint_steps_only_in_b;
    bool identical() const;
};

VerifyReport verify_runs(const std::string& run_a, const std::string& run_b);
std::string format_verify_report(const VerifyReport& report, const std::string& run_a, const std::string& run_b);

// The command: prints the report; 0 when identical, 1 when not.
int run_verify(const std::string& run_a, const std::string& run_b);

}  // namespace ampgrad::app
