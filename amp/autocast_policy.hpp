// autocast_policy.hpp: what autocast does to each op's inputs. THE table is in
// autocast_policy.cpp; this header gives it a type, a lookup, and the pure decision function that
// the op hook (autocast.cpp), the explainer tool (tools/amp_policy.cpp) and the tests all share.
// Not here: the thread-local autocast state or the cast cache (autocast.cpp).
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/autocast_state.hpp"
#include "core/device.hpp"
#include "core/dtype.hpp"

namespace ampgrad::amp {

enum class CastPolicy : uint8_t {
    kLowerPrecision,    // cast every eligible input to the autocast dtype (f16/bf16): matmul, linear...
    kFp32,              // cast every eligible input to f32: exp, log, layer_norm, losses...
    kFp32OutputDtype,   // compute and return f32 (PyTorch passes dtype=f32): softmax, sum...
    kPromote,           // cast eligible inputs to the widest floating dtype among them: cat, stack
    kBanned,            // refuse under autocast (AmpError): binary_cross_entropy
    kInputDtype,        // never cast: runs in its inputs' dtype, as PyTorch (on none of its lists): sin, floor...
};
std::string_view policy_name(CastPolicy policy);   // "lower_precision", "fp32", ...

struct PolicyEntry {
    std::string_view op;        // the name the op passes to AMPGRAD_AUTOCAST
    CastPolicy policy;
    std::string_view why;       // one line for the explainer
};

// Every op autocast knows, in table order. Ops not listed are never cast: they follow normal
// type promotion (f16 + f32 -> f32), as in PyTorch.
std::span<const PolicyEntry> policy_table();
const PolicyEntry* find_policy(std::string_view op);      // null when the op is not listed

// One input as the decision sees it.
struct CastInput {
    bool defined = true;
    DType dtype = kFloat32;
    DeviceType device = kCPU;
};
// The autocast state of one device type (core/autocast_state.hpp).
using ampgrad::AutocastState;
using ampgrad::AutocastStates;

// An input is eligible for a cast when it is defined, floating but not f64, and on a device type
// whose autocast is enabled (PyTorch's aten/src/ATen/autocast_mode.h; docs/amp.md §2).
bool is_eligible(const CastInput& in, std::span<const AutocastState, kNumDeviceTypes> state);

// The dtype each input is cast to under `policy` (nullopt: left as it is). Pure: no tensors.
// `state` is indexed by device_type_index(device type).
std::vector<std::optional<DType>> decide_casts(CastPolicy policy, std::span<const CastInput> inputs,
                                               std::span<const AutocastState, kNumDeviceTypes> state);

// Why `op` with these inputs runs in the dtypes it does, as a few lines of text, e.g.
//   matmul: policy lower_precision (tensor-core ops: ...)
//     input 0: f32 cpu -> bf16 (CPU autocast dtype)
std::string explain(std::string_view op, std::span<const CastInput> inputs, std::span<const AutocastState, kNumDeviceTypes> state);

// The whole table as text, grouped by policy (what `amp_policy` and `ampgrad info` print).
std::string policy_table_text();

// The error text for a banned op (PyTorch's binary_cross_entropy message, adapted).
std::string banned_message(std::string_view op);

}  // namespace ampgrad::amp
