// cross_entropy.cu: softmax cross-entropy straight from logits on the GPU, the twin of
// cpu/cross_entropy.cpp (derivation: docs/ops/cross_entropy.md). No probability tensor is kept:
// the forward saves each row's log-sum-exp, and the backward rebuilds softmax = exp(x - lse).
// Rows go to threads as in softmax.cu (cuda/rows.cuh): a warp per row for V <= 1024, a block of
// 512 threads per row beyond (a GPT vocabulary). The kernel returns per-row losses; the mean over
// the rows that are not ignored is the op's job (autograd/ops/loss.cpp), which passes dloss as a
// stride-0 expansion of one scalar.
//   forward: the row max, then the sum of exp(x - max), both shuffle reductions in fp32 (f64 for
//     f64); the group's first thread writes lse = max + log(sum) and loss = lse - x[target]
//     (0 where target == ignore_index).
//   backward: dlogits = (exp(x - lse) - [c == target]) * dloss[row]; an ignored row gets 0, or NaN
//     where x - lse is NaN, as the CPU kernel and PyTorch give. dloss is not read for it.
// Edge semantics follow the CPU: a NaN logit never wins the max but poisons the sum; a +inf logit
// or an all -inf row gives lse NaN; V == 0 gives lse -inf. A target outside [0, V) that is not
// ignore_index cannot be reported to the host without a synchronisation: the group's first thread
// prints it and stops the kernel with a device trap (as PyTorch's device-side asserts do); the error
// surfaces at the next synchronising call, and the CUDA context is lost.
#include <cstdio>
#include <limits>

#include "kernels/scalar_math.hpp"
#include "cuda/rows.cuh"

namespace ampgrad::cuda {

namespace {

// targets[n * stride], checked: in [0, V) or == ignore_index.
__device__ __forceinline__ int64_t checked_target(const int64_t* targets, int64_t stride, int64_t n, int64_t V,
                                                  int64_t ignore_index) {
    const int64_t t = targets[n * stride];
    if (t != ignore_index && (t < 0 || t >= V)) {
        printf("ampgrad cuda cross_entropy: target %lld at row %lld is out of range: expected 0 <= target < %lld or "
               "target == ignore_index (%lld)\n",
               static_cast<long long>(t), static_cast<long long>(n), static_cast<long long>(V),
               static_cast<long long>(ignore_index));
        __trap();
    }
    return t;
}

// ---- kernels ----

// loss, lse (N) contiguous, in Acc; logits (N,V) contiguous; targets (N) any stride
template <typename T, bool kBlock>
__global__ void cross_entropy_forward_kernel(device_compute_t<T>* loss, device_compute_t<T>* lse, const T* logits,
                                             const int64_t* targets, int64_t target_stride, int64_t N, int64_t V,
                                             int64_t ignore_index) {
    using Acc = device_compute_t<T>;
    const RowSlot slot = row_slot<kBlock>();
    auto max_of = [](Acc a, Acc b) { return b > a ? b : a; };    // cpu/rows.hpp's row_max: NaN never wins
    auto add = [](Acc a, Acc b) { return a + b; };
    const Acc lowest = -std::numeric_limits<Acc>::infinity();
    for (int64_t n = slot.first_row; n < N; n += slot.row_stride) {
        const T* x = logits + n * V;
        Acc mx = lowest;
        for (int64_t c = slot.lane; c < V; c += slot.lanes) mx = max_of(mx, load_compute(x[c]));
        mx = row_reduce<kBlock>(mx, max_of, lowest);
        Acc sum = 0;
        for (int64_t c = slot.lane; c < V; c += slot.lanes) sum += math::exp(load_compute(x[c]) - mx);
        sum = group_reduce<kBlock>(sum, add, Acc(0));              // valid in the group's first thread
        if (slot.lane == 0) {
            const int64_t t = checked_target(targets, target_stride, n, V, ignore_index);
            const Acc row_lse = mx + math::log(sum);
            lse[n] = row_lse;
            loss[n] = t == ignore_index ? Acc(0) : row_lse - load_compute(x[t]);
        }
    }
}

// dlogits, logits (N,V) contiguous; dloss (N) with stride dloss_stride (0: one broadcast value);
// lse (N) contiguous; targets (N) any stride
template <typename T, bool kBlock>
__global__ void cross_entropy_backward_kernel(T* dlogits, const device_compute_t<T>* dloss, int64_t dloss_stride,
                                              const T* logits, const device_compute_t<T>* lse, const int64_t* targets,
                                              int64_t target_stride, int64_t N, int64_t V, int64_t ignore_index) {
    using Acc = device_compute_t<T>;
    const RowSlot slot = row_slot<kBlock>();
    for (int64_t n = slot.first_row; n < N; n += slot.row_stride) {
        const T* x = logits + n * V;
        T* d = dlogits + n * V;
        // every thread needs the target; the first one checks it (the others only compare with it)
        const int64_t t = slot.lane == 0 ? checked_target(targets, target_stride, n, V, ignore_index)
                                         : targets[n * target_stride];
        const Acc row_lse = lse[n];
        if (t == ignore_index) {
            for (int64_t c = slot.lane; c < V; c += slot.lanes) {
                const Acc z = load_compute(x[c]) - row_lse;
                d[c] = store_compute<T>(z != z ? std::numeric_limits<Acc>::quiet_NaN() : Acc(0));   // z != z: NaN
            }
            continue;
        }
        const Acc g = dloss[n * dloss_stride];
        for (int64_t c = slot.lane; c < V; c += slot.lanes) {
            const Acc p = math::exp(load_compute(x[c]) - row_lse);
            d[c] = store_compute<T>((c == t ? p - Acc(1) : p) * g);
        }
    }
}

// ---- launchers ----

// The CPU kernel's checks: logits contiguous (N,V); per-row tensors (N) of the stat dtype (f32,
// f64 for f64 logits); targets (N) int64; and everything on the logits' GPU.
void check_rows(const char* kernel, const Tensor& logits, const Tensor& targets,
                std::initializer_list<const Tensor*> per_row) {
    const DType stat = logits.dtype() == kFloat64 ? kFloat64 : kFloat32;
    AMPGRAD_CHECK(logits.dim() == 2 && logits.is_contiguous(), "{}: logits must be contiguous (N,V), got {}", kernel,
                  logits.describe());
    for (const Tensor* t : per_row)
        AMPGRAD_CHECK(t->dim() == 1 && t->numel() == logits.size(0) && t->dtype() == stat,
                      "{}: expected ({}) {}, got {}", kernel, logits.size(0), dtype_name(stat), t->describe());
    AMPGRAD_CHECK(targets.dim() == 1 && targets.numel() == logits.size(0), "{}: targets {} for {}", kernel,
                  targets.describe(), logits.describe());
    if (targets.dtype() != kInt64)
        throw DTypeError(fmt::format("cross_entropy: targets must be int64 class indices but got {}",
                                     targets.describe()));
    require_on_device(kernel, logits.device().index, {&logits, &targets});
    for (const Tensor* t : per_row) require_on_device(kernel, logits.device().index, {t});
}

}  // namespace

void cross_entropy(const Tensor& loss, const Tensor& lse, const Tensor& logits, const Tensor& targets,
                   int64_t ignore_index) {
    check_rows("cross_entropy", logits, targets, {&loss, &lse});
    AMPGRAD_CHECK(loss.is_contiguous() && lse.is_contiguous(), "cross_entropy: loss/lse must be contiguous");
    const int64_t N = logits.size(0), V = logits.size(1);
    if (N == 0) return;
    DeviceGuard guard(logits.device().index);
    dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
        using T = decltype(tag);
        using Acc = device_compute_t<T>;
        const RowLaunch l = row_launch(N, V);
        auto launch = [&](auto kernel) {
            kernel<<<l.blocks, l.threads, 0, current_stream()>>>(device_ptr<Acc>(loss), device_ptr<Acc>(lse),
                                                                 device_ptr<const T>(logits),
                                                                 device_ptr<const int64_t>(targets), targets.stride(0),
                                                                 N, V, ignore_index);
        };
        if (l.block) launch(cross_entropy_forward_kernel<T, true>);
        else launch(cross_entropy_forward_kernel<T, false>);
        CUDA_CHECK(cudaGetLastError());
    });
}

void cross_entropy_backward(const Tensor& dlogits, const Tensor& dloss, const Tensor& logits, const Tensor& lse,
                            const Tensor& targets, int64_t ignore_index) {
    check_rows("cross_entropy_backward", logits, targets, {&dloss, &lse});
    AMPGRAD_CHECK(dlogits.is_contiguous() && dlogits.sizes() == logits.sizes() && dlogits.dtype() == logits.dtype() &&
                      lse.is_contiguous(),
                  "cross_entropy_backward: dlogits {} must be contiguous like logits {}", dlogits.describe(),
                  logits.describe());
    require_on_device("cross_entropy_backward", logits.device().index, {&dlogits});
    const int64_t N = logits.size(0), V = logits.size(1);
    if (N == 0 || V == 0) return;
    DeviceGuard guard(logits.device().index);
    dispatch_float(logits.dtype(), "cross_entropy_backward", [&](auto tag) {
        using T = decltype(tag);
        using Acc = device_compute_t<T>;
        const RowLaunch l = row_launch(N, V);
        auto launch = [&](auto kernel) {
            kernel<<<l.blocks, l.threads, 0, current_stream()>>>(
                device_ptr<T>(dlogits), device_ptr<const Acc>(dloss), dloss.stride(0), device_ptr<const T>(logits),
                device_ptr<const Acc>(lse), device_ptr<const int64_t>(targets), targets.stride(0), N, V, ignore_index);
        };
        if (l.block) launch(cross_entropy_backward_kernel<T, true>);
        else launch(cross_entropy_backward_kernel<T, false>);
        CUDA_CHECK(cudaGetLastError());
    });
}

AMPGRAD_REGISTER_KERNEL(kernels::cross_entropy, kCUDA, cross_entropy);
AMPGRAD_REGISTER_KERNEL(kernels::cross_entropy_backward, kCUDA, cross_entropy_backward);

}  // namespace ampgrad::cuda
