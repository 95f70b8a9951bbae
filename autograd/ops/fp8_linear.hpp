// fp8_linear.hpp: F::fp8_linear, a linear layer whose three GEMMs run in fp8 (docs/fp8.md §6-8):
// the forward y = x W^T and, in its backward, dgrad = g W and wgrad = g^T x, each an F::scaled_mm
// of operands quantised with one scale per tensor role (input, weight, grad_output) or per row.
// Where the scales come from is the recipe's business:
//   kDelayed    Transformer Engine's DelayedScaling: the layer's Fp8LinearState::scale, computed by
//               amp::Fp8Training from the amax history of earlier steps (amp/fp8_recipe.hpp);
//   kTensorwise torchao's current scaling: each tensor's own amax, one scale per tensor;
//   kRowwise    torchao's "rowwise" recipe: one power-of-two scale per row of each GEMM operand.
// Every call with grad mode on records each role's amax into Fp8LinearState::amax (a running max
// until the recipe reads and clears it after the step), with tensor ops only: nothing waits for the
// device. Under no_grad (evaluation) the amaxes are left alone, so evaluating never moves the scales.
//
//   auto state = std::make_shared<Fp8LinearState>(Fp8LinearState::make(Fp8Scaling::kDelayed, kCPU));
//   Tensor y = F::fp8_linear(x, w, state, kBFloat16);   // x (M,K), w (N,K) -> y (M,N) bf16
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string_view>

#include "core/tensor.hpp"

namespace ampgrad {

enum class Fp8Scaling : uint8_t { kDelayed, kTensorwise, kRowwise };
enum class Fp8Role : uint8_t { kInput = 0, kWeight = 1, kGradOutput = 2 };
inline constexpr int kFp8Roles = 3;
inline constexpr std::array<Fp8Role, kFp8Roles> kAllFp8Roles = {Fp8Role::kInput, Fp8Role::kWeight, Fp8Role::kGradOutput};

std::string_view fp8_role_name(Fp8Role role);            // "input", "weight", "grad_output"
std::string_view fp8_scaling_name(Fp8Scaling scaling);   // "delayed", "tensorwise", "rowwise"
double fp8_max(DType fp8_dtype);                         // 448 (e4m3fn) or 57344 (e5m2); DTypeError otherwise

// One fp8 linear layer's per-role formats, scales and observed amaxes. The tensors live on the
// layer's device and never require grad.
struct Fp8LinearState {
    Fp8Scaling scaling = Fp8Scaling::kDelayed;
    std::array<DType, kFp8Roles> dtypes{kFloat8_e4m3fn, kFloat8_e4m3fn, kFloat8_e5m2};   // HYBRID
    Tensor scale;   // (3) f32: kDelayed only: role r is quantised as saturate(x * scale[r])
    Tensor amax;    // (3) f32: max |x| of each role seen since the recipe last cleared it

    DType dtype(Fp8Role role) const { return dtypes[static_cast<size_t>(role)]; }
    // Scales 1, amaxes 0. HYBRID formats; kRowwise uses e4m3fn for all three roles (torchao's recipe).
    static Fp8LinearState make(Fp8Scaling scaling, Device device);
};

// torchao's amax_to_scale: fp8_max / max(amax, 1e-12) in f64, stored as f32, optionally rounded
// down to a power of two. amax f32, any shape; the result has its shape.
Tensor fp8_amax_to_scale(const Tensor& amax, DType fp8_dtype, bool round_to_power_of_2);

// x (R,C) any float -> saturate(x.f32 * scale) in fp8_dtype; scale f32, one element or (R,1).
Tensor fp8_quantize_with_scale(const Tensor& x, const Tensor& scale, DType fp8_dtype);

namespace nn::functional {

// y (M,N) = x (M,K) W^T (N,K) in fp8, out_dtype f32/f16/bf16 (kRowwise: bf16). x and w are any
// float dtype; their gradients come back in their dtypes. K, N and (for the weight gradient) M must
// be multiples of 16 (torch._scaled_mm's rule): ShapeError otherwise, naming the op.
Tensor fp8_linear(const Tensor& x, const Tensor& w, const std::shared_ptr<Fp8LinearState>& state, DType out_dtype);

// True when fp8_linear takes these sizes (the layers that do not stay in bf16 under fp8 autocast).
bool fp8_linear_supports(int64_t M, int64_t K, int64_t N);

}  // namespace nn::functional

// ---- the fp8 autocast flag (amp::AutocastGuard's kFloat8 mode sets it; nn::Linear reads it) ----
namespace fp8_autocast {
bool enabled();                 // this thread is inside an fp8 autocast region
class Scope {                   // RAII: sets the flag, restores the previous value on exit
public:
    explicit Scope(bool enabled);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

private:
    bool previous_;
};
}  // namespace fp8_autocast

}  // namespace ampgrad
