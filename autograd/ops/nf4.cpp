// nf4.cpp: NF4 quantisation of a weight (QLoRA's frozen base), its dequantisation, and
// F::nf4_linear, whose forward and backward both dequantise the weight (docs/nf4.md):
//   y  (*,N) = x (*,K) deq(W)^T + b          deq(W) (N,K) in x's dtype, freed after the GEMM
//   dx (*,K) = dy (*,N) deq(W)               the weight dequantised again, not saved
//   db (N)   = sum of dy over the rows;      W is frozen: no gradient
// The kernels (cpu/nf4.cpp, cuda/nf4.cu) hold the loops; kernels/nf4.hpp the formulas.
#include "autograd/ops/nf4.hpp"

#include <memory>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/autocast_hook.hpp"
#include "autograd/ops/op_utils.hpp"
#include "autograd/ops/ops.hpp"
#include "autograd/record.hpp"
#include "kernels/nf4.hpp"

namespace ampgrad {

using autograd::BackwardContext;
using autograd::record;

namespace {

int64_t blocks_of(int64_t n, int64_t block_size) { return (n + block_size - 1) / block_size; }

void check_options(const Tensor& w, const NF4Options& options) {
    ops::check_defined("quantize_nf4", w, "w");
    if (!is_floating(w.dtype()) || is_float8(w.dtype()))
        throw DTypeError(fmt::format("quantize_nf4: expected a f32, f64, f16 or bf16 tensor but w is {}", w.describe()));
    if (options.block_size < 2 || options.block_size % 2 != 0)
        throw ValueError(fmt::format("quantize_nf4: block_size must be even and >= 2 (QLoRA: 64), got {} for w {}",
                                     options.block_size, w.describe()));
}

// Double quantisation: absmax (B) f32 -> its mean, and (absmax - mean) as 8-bit codes in blocks of 256.
void quantize_absmax(NF4Tensor& t) {
    const int64_t count = t.absmax.numel();
    t.absmax_offset = reshape(mean(t.absmax), {1});                                     // (1)
    Tensor centred = (t.absmax - t.absmax_offset).contiguous();                         // (B)
    t.absmax_codes = make_empty({count}, kUInt8, t.device());                           // (B)
    t.absmax2 = make_empty({blocks_of(count, nf4::kAbsmaxBlockSize)}, kFloat32, t.device());
    kernels::dynamic_quantize(t.absmax_codes, t.absmax2, centred, nf4::kAbsmaxBlockSize);
    t.absmax = Tensor();
}

void check_linear_operands(const Tensor& x, const NF4Tensor& w, const Tensor& b) {
    ops::check_defined("nf4_linear", x, "x");
    if (!w.defined())
        throw ValueError(fmt::format("nf4_linear: the NF4 weight is empty (quantize a weight with quantize_nf4); x is {}",
                                     x.describe()));
    if (w.shape.size() != 2 || x.dim() < 1 || x.size(-1) != w.shape[1])
        throw ShapeError(fmt::format("nf4_linear: expected x (*,K) and weight (N,K) but got x is {}, weight is {}",
                                     x.describe(), w.describe()));
    if (x.device() != w.device())
        throw DeviceError(fmt::format("nf4_linear: devices differ: x is {}, weight is {}", x.describe(), w.describe()));
    if (!is_floating(x.dtype()) || is_float8(x.dtype()))
        throw DTypeError(fmt::format("nf4_linear: x must be f32, f64, f16 or bf16 but is {}", x.describe()));
    if (b.defined() && (b.dim() != 1 || b.size(0) != w.shape[0]))
        throw ShapeError(fmt::format("nf4_linear: bias must be ({}) for weight {} but is {}", w.shape[0], w.describe(),
                                     b.describe()));
}

}  // namespace

int64_t NF4Tensor::nbytes() const {
    int64_t total = 0;
    for (const Tensor* t : {&codes, &absmax, &absmax_codes, &absmax2, &absmax_offset})
        if (t->defined()) total += t->numel() * static_cast<int64_t>(element_size(t->dtype()));
    return total;
}

std::string NF4Tensor::describe() const {
    if (!defined()) return "nf4 (undefined)";
    return fmt::format("nf4 {} block {} {}{}", shape_str(shape), block_size, device().str(),
                       double_quantized() ? " double-quant" : "");
}

NF4Tensor quantize_nf4(const Tensor& w, NF4Options options) {
    check_options(w, options);
    NoGradGuard no_grad;
    NF4Tensor t;
    t.shape = w.sizes();
    t.dtype = w.dtype();
    t.block_size = options.block_size;
    const int64_t n = w.numel();
    Tensor dense = w.detach().contiguous();                                             // (n) in w's dtype
    t.codes = make_empty({(n + 1) / 2}, kUInt8, w.device());                            // (ceil(n/2))
    t.absmax = make_empty({blocks_of(n, options.block_size)}, kFloat32, w.device());    // (ceil(n/B))
    if (n > 0) kernels::nf4_quantize(t.codes, t.absmax, dense, options.block_size);
    if (options.double_quant && n > 0) quantize_absmax(t);
    return t;
}

Tensor nf4_absmax(const NF4Tensor& w) {
    if (!w.double_quantized()) return w.absmax;
    Tensor out = make_empty({w.absmax_codes.numel()}, kFloat32, w.device());            // (ceil(n/B))
    kernels::dynamic_dequantize(out, w.absmax_codes, w.absmax2, w.absmax_offset, nf4::kAbsmaxBlockSize);
    return out;
}

Tensor dequantize_nf4(const NF4Tensor& w, DType dtype) {
    if (!w.defined()) throw ValueError("dequantize_nf4: the NF4 tensor is empty (made by quantize_nf4?)");
    if (!is_floating(dtype) || is_float8(dtype))
        throw DTypeError(fmt::format("dequantize_nf4: dtype must be f32, f64, f16 or bf16, got {} for {}",
                                     dtype_name(dtype), w.describe()));
    Tensor out = make_empty(w.shape, dtype, w.device());                                 // w.shape
    if (out.numel() > 0) kernels::nf4_dequantize(out, w.codes, nf4_absmax(w), w.block_size);
    return out;
}

namespace nn::functional {

Tensor nf4_linear(const Tensor& x_in, const NF4Tensor& w, const Tensor& b_in) {
    Tensor x = x_in, b = b_in;
    AMPGRAD_AUTOCAST("linear", &x, &b);                  // linear's policy: the weight follows x
    check_linear_operands(x, w, b);
    const int64_t n = w.shape[0];
    Tensor y;
    {
        NoGradGuard no_grad;                   // the graph is this op's node alone
        Tensor w_dense = dequantize_nf4(w, x.dtype());   // (N,K), freed when this scope ends
        y = linear(x, w_dense, b);                       // (*,N)
    }
    auto weight = std::make_shared<const NF4Tensor>(w);   // handles to the frozen codes, no copy
    return record("nf4_linear", y, {x, b}, {}, [weight, n](BackwardContext& ctx, const tensor_list& g) {
        tensor_list d(2);
        if (ctx.needs_input_grad(0)) d[0] = matmul(g[0], dequantize_nf4(*weight, g[0].dtype()));   // (*,N)(N,K)
        if (ctx.needs_input_grad(1)) d[1] = sum_to(g[0], {n});                                    // (N)
        return d;
    });
}

}  // namespace nn::functional

}  // namespace ampgrad
