// attention.cu: fused scaled-dot-product attention on the GPU, flash-attention style, the twin
// of cpu/attention.cpp (same arguments, same edge semantics; derivation in docs/ops/attention.md):
//   forward:  S = scale * q k^T;  P = softmax(S) (causal: row i sees keys 0..i);  O = P v;
//             lse_i = log sum_j exp(S_ij); a row whose scores are all -inf gets P = 0, lse = -inf
//   backward: P = exp(S - lse);  D_i = dO_i . O_i;  dv = P^T dO;  dS = P * (dP - D), dP = dO v^T;
//             dq = scale * dS k;  dk = scale * dS^T q
// Neither pass ever holds the (T,S) matrix. Everything is computed in device_compute_t<T> (fp32
// for f16/bf16, f64 for f64) and rounded once on store.
//   forward: one block per (batch, head, tile of kRows query rows), one warp per query row.
//     Tiles of 32 keys and values pass through shared memory; lane j scores key j of the tile,
//     and the warp keeps the online softmax (running max m, running sum l) and the output row
//     (lane owns columns lane, lane+32, ...), rescaled whenever m grows.
//   backward: D first (one warp per row), then two kernels with no atomics, so results are
//     deterministic: dq with the forward's layout (warp per query row, looping over key tiles),
//     and dk, dv with one block per tile of kRows keys, one warp per key, looping over tiles of
//     32 query rows (lane i takes query i of the tile).
// Grouped-query attention: k, v (and dk, dv) have NKV heads, NH a multiple of NKV; query head h reads
// kv head h / (NH / NKV), and the dk, dv kernel's blocks take kv heads and loop over their query heads,
// so K/V are never copied per head and the sums stay deterministic.
// Head sizes up to kMaxHead; q, k, v, out, dout, dq, dk, dv may have any strides.
// These kernels run f64 (and anything AMPGRAD_ATTENTION=fused asks for); for f32/f16/bf16 the
// attention op takes the GEMM path by default (kernels/attention_gemm.hpp, as cuda/capabilities.cu
// says), whose products run on cuBLAS's tensor cores.
#include <algorithm>
#include <limits>

#include "kernels/fused_kernels.hpp"
#include "kernels/kernel_preconditions.hpp"
#include "kernels/scalar_math.hpp"
#include "cuda/loops.cuh"

namespace ampgrad::cuda {

namespace {

constexpr int kWarp = 32;
constexpr int kRows = 8;                          // warps per block: query rows (forward, dq) or keys (dk, dv)
constexpr int kTile = kWarp;                      // keys (forward, dq) or query rows (dk, dv) per shared tile
constexpr int kMaxHead = 256;                     // HS and HSv
constexpr int kPerLane = kMaxHead / kWarp;        // output columns each lane accumulates
constexpr int64_t kMaxGrid = int64_t(1) << 30;    // blocks launched; a grid-stride loop covers the rest

// A (B,NH,R,X) tensor on the device: element (b,h,r,x) at data[b*sb + h*sh + r*sr + x*sx].
template <typename T>
struct Heads {
    T* data;
    int64_t sb, sh, sr, sx;
    __device__ T& at(int64_t b, int64_t h, int64_t r, int64_t x) const {
        return data[b * sb + h * sh + r * sr + x * sx];
    }
};

template <typename T>
Heads<T> heads_of(const Tensor& t) {
    return {static_cast<T*>(t.raw_data()), t.stride(0), t.stride(1), t.stride(2), t.stride(3)};
}

struct Dims {
    int64_t B, NH, T, S, HS, HSv;
    bool causal;
    int64_t NKV;                                  // key/value heads; NH / NKV query heads share each
    __device__ int64_t kv_head(int64_t h) const { return h / (NH / NKV); }
};

__device__ __forceinline__ float exp_c(float x) { return expf(x); }
__device__ __forceinline__ double exp_c(double x) { return exp(x); }
__device__ __forceinline__ float log_c(float x) { return logf(x); }
__device__ __forceinline__ double log_c(double x) { return log(x); }

template <typename C>
__device__ __forceinline__ C warp_max(C v) {
    for (int off = kWarp / 2; off > 0; off /= 2) v = max(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}
template <typename C>
__device__ __forceinline__ C warp_sum(C v) {
    for (int off = kWarp / 2; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

// Keys row i may attend to: all S, or 0..i under the causal mask (kernels/scalar_math.hpp, shared).
__device__ __forceinline__ int64_t visible_keys(int64_t i, const Dims& d) {
    return formulas::attention_visible_keys(i, d.S, d.causal);
}

// rows (rows, X) of one head into shared memory at row stride ld, zeros past `limit` rows.
template <typename T, typename C>
__device__ void load_rows(C* dst, int ld, const Heads<const T>& src, int64_t b, int64_t h, int64_t r0, int rows,
                          int64_t limit, int64_t X) {
    for (int64_t e = threadIdx.x; e < rows * X; e += blockDim.x) {
        const int64_t r = e / X, x = e % X;
        dst[r * ld + x] = r0 + r < limit ? load_compute(src.at(b, h, r0 + r, x)) : C(0);
    }
}

// dot(a[0..n), b[0..n)) in shared memory
template <typename C>
__device__ __forceinline__ C dot(const C* a, const C* b, int64_t n) {
    C acc = 0;
    for (int64_t x = 0; x < n; ++x) acc += a[x] * b[x];
    return acc;
}

// ---- forward ----

template <typename T>
__global__ void forward_kernel(Dims d, Heads<const T> q, Heads<const T> k, Heads<const T> v, Heads<T> out,
                               device_compute_t<T>* lse, device_compute_t<T> scale, int64_t tiles, int64_t blocks) {
    using C = device_compute_t<T>;
    extern __shared__ __align__(16) unsigned char smem[];
    const int ldk = static_cast<int>(d.HS) + 1;                       // padded: lane j reads row j
    C* ks = reinterpret_cast<C*>(smem);                               // (kTile, HS+1)
    C* vs = ks + kTile * ldk;                                         // (kTile, HSv)
    C* qs = vs + kTile * d.HSv;                                       // (kRows, HS)
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    const C inf = std::numeric_limits<C>::infinity();
    for (int64_t blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const int64_t head = blk / tiles, b = head / d.NH, h = head % d.NH, i0 = (blk % tiles) * kRows;
        const int64_t i = i0 + warp, visible = i < d.T ? visible_keys(i, d) : 0;
        const int64_t keys = d.causal ? min(i0 + kRows, d.S) : d.S;   // keys any row of the block sees
        __syncthreads();                                              // the previous block's reads are done
        load_rows<T>(qs, static_cast<int>(d.HS), q, b, h, i0, kRows, d.T, d.HS);
        C m = -inf, l = 0, o[kPerLane] = {};
        for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
            __syncthreads();
            load_rows<T>(ks, ldk, k, b, d.kv_head(h), j0, kTile, d.S, d.HS);
            load_rows<T>(vs, static_cast<int>(d.HSv), v, b, d.kv_head(h), j0, kTile, d.S, d.HSv);
            __syncthreads();
            const int64_t j = j0 + lane;
            const C s = j < visible ? scale * dot(qs + warp * d.HS, ks + lane * ldk, d.HS) : -inf;
            const C m_new = max(m, warp_max(s));
            const C shift = m_new == -inf ? C(0) : m_new;             // all -inf so far: p = 0, not NaN
            const C p = j < visible ? exp_c(s - shift) : C(0);
            const C alpha = exp_c(m - shift);
            l = l * alpha + warp_sum(p);
            for (int r = 0; r < kPerLane; ++r) o[r] *= alpha;
            for (int jj = 0; jj < kTile; ++jj) {
                const C pj = __shfl_sync(0xffffffffu, p, jj);
                for (int r = 0; r < kPerLane; ++r)
                    if (lane + r * kWarp < d.HSv) o[r] += pj * vs[jj * d.HSv + lane + r * kWarp];
            }
            m = m_new;
        }
        if (i >= d.T) continue;
        // Every score -inf: P = 0, lse = -inf. Tested on l, not m: warp_max's fmax drops NaN, so a row
        // of NaN scores keeps m = -inf, but its l is NaN and it must come out NaN, as on the CPU.
        const bool dead = l == C(0);
        for (int r = 0; r < kPerLane; ++r)
            if (lane + r * kWarp < d.HSv) out.at(b, h, i, lane + r * kWarp) = store_compute<T>(dead ? C(0) : o[r] / l);
        if (lane == 0) lse[head * d.T + i] = dead ? -inf : m + log_c(l);
    }
}

// ---- backward ----

// D_i = dO_i . O_i, one warp per row, into delta (B*NH*T) of the compute type.
template <typename T>
__global__ void delta_kernel(Dims d, Heads<const T> dout, Heads<const T> out, device_compute_t<T>* delta) {
    using C = device_compute_t<T>;
    const int64_t rows = d.B * d.NH * d.T, warps = static_cast<int64_t>(gridDim.x) * blockDim.x / kWarp;
    const int lane = threadIdx.x % kWarp;
    for (int64_t row = first_index() / kWarp; row < rows; row += warps) {
        const int64_t head = row / d.T, b = head / d.NH, h = head % d.NH, i = row % d.T;
        C acc = 0;
        for (int64_t x = lane; x < d.HSv; x += kWarp)
            acc += load_compute(dout.at(b, h, i, x)) * load_compute(out.at(b, h, i, x));
        acc = warp_sum(acc);
        if (lane == 0) delta[row] = acc;
    }
}

// P_ij (0 where masked or where the row is dead) and dS_ij = P_ij (dP_ij - D_i).
template <typename C>
struct ProbGrad {
    C p, ds;
};
template <typename C>
__device__ __forceinline__ ProbGrad<C> prob_grad(bool visible, C s, C lse_i, C dp, C delta_i) {
    const C p = visible && lse_i != -std::numeric_limits<C>::infinity() ? exp_c(s - lse_i) : C(0);
    return {p, p * (dp - delta_i)};
}

// dq: one warp per query row, key tiles through shared memory (the forward's layout).
template <typename T>
__global__ void dq_kernel(Dims d, Heads<const T> q, Heads<const T> k, Heads<const T> v, Heads<const T> dout,
                          Heads<T> dq, const device_compute_t<T>* lse, const device_compute_t<T>* delta,
                          device_compute_t<T> scale, int64_t tiles, int64_t blocks) {
    using C = device_compute_t<T>;
    extern __shared__ __align__(16) unsigned char smem[];
    const int ldk = static_cast<int>(d.HS) + 1, ldv = static_cast<int>(d.HSv) + 1;
    C* ks = reinterpret_cast<C*>(smem);                               // (kTile, HS+1)
    C* vs = ks + kTile * ldk;                                         // (kTile, HSv+1)
    C* qs = vs + kTile * ldv;                                         // (kRows, HS)
    C* dos = qs + kRows * d.HS;                                       // (kRows, HSv)
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    for (int64_t blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const int64_t head = blk / tiles, b = head / d.NH, h = head % d.NH, i0 = (blk % tiles) * kRows;
        const int64_t i = i0 + warp, visible = i < d.T ? visible_keys(i, d) : 0;
        const int64_t keys = d.causal ? min(i0 + kRows, d.S) : d.S;
        const C lse_i = i < d.T ? lse[head * d.T + i] : C(0), delta_i = i < d.T ? delta[head * d.T + i] : C(0);
        __syncthreads();
        load_rows<T>(qs, static_cast<int>(d.HS), q, b, h, i0, kRows, d.T, d.HS);
        load_rows<T>(dos, static_cast<int>(d.HSv), dout, b, h, i0, kRows, d.T, d.HSv);
        C acc[kPerLane] = {};
        for (int64_t j0 = 0; j0 < keys; j0 += kTile) {
            __syncthreads();
            load_rows<T>(ks, ldk, k, b, d.kv_head(h), j0, kTile, d.S, d.HS);
            load_rows<T>(vs, ldv, v, b, d.kv_head(h), j0, kTile, d.S, d.HSv);
            __syncthreads();
            const bool seen = j0 + lane < visible;
            const C s = seen ? scale * dot(qs + warp * d.HS, ks + lane * ldk, d.HS) : C(0);
            const C dp = seen ? dot(dos + warp * d.HSv, vs + lane * ldv, d.HSv) : C(0);
            const C ds = prob_grad(seen, s, lse_i, dp, delta_i).ds;
            for (int jj = 0; jj < kTile; ++jj) {
                const C dsj = __shfl_sync(0xffffffffu, ds, jj);
                for (int r = 0; r < kPerLane; ++r)
                    if (lane + r * kWarp < d.HS) acc[r] += dsj * ks[jj * ldk + lane + r * kWarp];
            }
        }
        if (i >= d.T) continue;
        for (int r = 0; r < kPerLane; ++r)
            if (lane + r * kWarp < d.HS) dq.at(b, h, i, lane + r * kWarp) = store_compute<T>(scale * acc[r]);
    }
}

// dk, dv: one warp per key, tiles of query rows through shared memory; lane i takes query i0+i. A block
// owns kv head hk and sums over the query heads that share it.
template <typename T>
__global__ void dkv_kernel(Dims d, Heads<const T> q, Heads<const T> k, Heads<const T> v, Heads<const T> dout,
                           Heads<T> dk, Heads<T> dv, const device_compute_t<T>* lse, const device_compute_t<T>* delta,
                           device_compute_t<T> scale, int64_t tiles, int64_t blocks) {
    using C = device_compute_t<T>;
    extern __shared__ __align__(16) unsigned char smem[];
    const int ldq = static_cast<int>(d.HS) + 1, ldo = static_cast<int>(d.HSv) + 1;
    C* qs = reinterpret_cast<C*>(smem);                               // (kTile, HS+1)
    C* dos = qs + kTile * ldq;                                        // (kTile, HSv+1)
    C* kr = dos + kTile * ldo;                                        // (kRows, HS): this block's keys
    C* vr = kr + kRows * d.HS;                                        // (kRows, HSv)
    C* row_lse = vr + kRows * d.HSv;                                  // (kTile)
    C* row_delta = row_lse + kTile;                                   // (kTile)
    const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp;
    for (int64_t blk = blockIdx.x; blk < blocks; blk += gridDim.x) {
        const int64_t kv = blk / tiles, b = kv / d.NKV, hk = kv % d.NKV, j0 = (blk % tiles) * kRows;
        const int64_t j = j0 + warp, group = d.NH / d.NKV;
        __syncthreads();
        load_rows<T>(kr, static_cast<int>(d.HS), k, b, hk, j0, kRows, d.S, d.HS);
        load_rows<T>(vr, static_cast<int>(d.HSv), v, b, hk, j0, kRows, d.S, d.HSv);
        C dk_acc[kPerLane] = {}, dv_acc[kPerLane] = {};
        for (int64_t h = hk * group; h < (hk + 1) * group; ++h)          // the query heads sharing hk
        for (int64_t i0 = d.causal ? j0 : 0; i0 < d.T; i0 += kTile) {   // causal: rows before j0 see none of these keys
            const int64_t head = b * d.NH + h;
            __syncthreads();
            load_rows<T>(qs, ldq, q, b, h, i0, kTile, d.T, d.HS);
            load_rows<T>(dos, ldo, dout, b, h, i0, kTile, d.T, d.HSv);
            if (threadIdx.x < kTile) {
                const int64_t i = i0 + threadIdx.x;
                row_lse[threadIdx.x] = i < d.T ? lse[head * d.T + i] : C(0);
                row_delta[threadIdx.x] = i < d.T ? delta[head * d.T + i] : C(0);
            }
            __syncthreads();
            const int64_t i = i0 + lane;
            const bool seen = i < d.T && j < visible_keys(i, d);
            const C s = seen ? scale * dot(qs + lane * ldq, kr + warp * d.HS, d.HS) : C(0);
            const C dp = seen ? dot(dos + lane * ldo, vr + warp * d.HSv, d.HSv) : C(0);
            const ProbGrad<C> g = prob_grad(seen, s, row_lse[lane], dp, row_delta[lane]);
            for (int ii = 0; ii < kTile; ++ii) {
                const C pi = __shfl_sync(0xffffffffu, g.p, ii), dsi = __shfl_sync(0xffffffffu, g.ds, ii);
                for (int r = 0; r < kPerLane; ++r) {
                    const int x = lane + r * kWarp;
                    if (x < d.HSv) dv_acc[r] += pi * dos[ii * ldo + x];
                    if (x < d.HS) dk_acc[r] += dsi * qs[ii * ldq + x];
                }
            }
        }
        if (j >= d.S) continue;
        for (int r = 0; r < kPerLane; ++r) {
            const int x = lane + r * kWarp;
            if (dv.data && x < d.HSv) dv.at(b, hk, j, x) = store_compute<T>(dv_acc[r]);
            if (dk.data && x < d.HS) dk.at(b, hk, j, x) = store_compute<T>(scale * dk_acc[r]);
        }
    }
}

// ---- host side ----

// Shared memory of each kernel, in elements of the compute type.
int64_t forward_smem(const Dims& d) { return kTile * (d.HS + 1) + kTile * d.HSv + kRows * d.HS; }
int64_t backward_smem(const Dims& d) {                           // dq and dk/dv (the larger)
    return kTile * (d.HS + 1) + kTile * (d.HSv + 1) + kRows * (d.HS + d.HSv) + 2 * kTile;
}

// Launches kernel over `blocks` blocks of kRows warps with `elems` compute-type elements of
// shared memory, raising the kernel's limit above the default 48 KiB when needed.
template <typename C, typename Kernel, typename... Args>
void launch(Kernel kernel, int64_t blocks, int64_t elems, Args... args) {
    const size_t bytes = static_cast<size_t>(elems) * sizeof(C);
    if (bytes > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    const int grid = static_cast<int>(std::min(blocks, kMaxGrid));
    kernel<<<grid, kRows * kWarp, bytes, current_stream()>>>(args..., blocks);
    CUDA_CHECK(cudaGetLastError());
}

void check_args(const char* op, const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k,
                const Tensor& v) {
    require_on_device(op, q.device().index, {&out, &lse, &q, &k, &v});
    check_attention_args(op, out, lse, q, k, v);
    if (q.size(3) > kMaxHead || v.size(3) > kMaxHead)
        throw NotImplementedError(fmt::format("cuda {}: head sizes {} (q, k) and {} (v) exceed the kernel's {}", op,
                                              q.size(3), v.size(3), kMaxHead));
}

Dims dims_of(const Tensor& q, const Tensor& k, const Tensor& v, bool causal) {
    return {q.size(0), q.size(1), q.size(2), k.size(2), q.size(3), v.size(3), causal, k.size(1)};
}

int64_t tiles_of(int64_t rows) { return (rows + kRows - 1) / kRows; }

void forward_entry(const Tensor& out, const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v,
                   double scale, bool causal) {
    check_args("attention", out, lse, q, k, v);
    if (lse.numel() == 0) return;   // B*NH*T == 0. HS == 0 still writes: scores 0, P uniform over the visible keys
    DeviceGuard guard(q.device().index);
    const Dims d = dims_of(q, k, v, causal);
    dispatch_float(q.dtype(), "attention", [&](auto tag) {
        using T = decltype(tag);
        using C = device_compute_t<T>;
        const int64_t tiles = tiles_of(d.T);
        launch<C>(forward_kernel<T>, d.B * d.NH * tiles, forward_smem(d), d, heads_of<const T>(q),
                  heads_of<const T>(k), heads_of<const T>(v), heads_of<T>(out), static_cast<C*>(lse.raw_data()),
                  static_cast<C>(scale), tiles);
    });
}

template <typename T>
Heads<T> heads_or_null(const Tensor& t) {
    return t.defined() ? heads_of<T>(t) : Heads<T>{nullptr, 0, 0, 0, 0};
}

void backward_entry(const Tensor& dq, const Tensor& dk, const Tensor& dv, const Tensor& dout, const Tensor& out,
                    const Tensor& lse, const Tensor& q, const Tensor& k, const Tensor& v, double scale, bool causal) {
    require_on_device("attention_backward", q.device().index, {&out, &lse, &q, &k, &v, &dout});
    for (const Tensor* g : {&dq, &dk, &dv})
        if (g->defined()) require_on_device("attention_backward", q.device().index, {g});
    check_args("attention_backward", out, lse, q, k, v);
    check_attention_grads("attention_backward", dq, dk, dv, dout, out, q, k, v);
    auto has_elements = [](const Tensor& t) { return t.defined() && t.numel() > 0; };
    if (!has_elements(dq) && !has_elements(dk) && !has_elements(dv)) return;   // T == 0 still zeroes dk, dv
    DeviceGuard guard(q.device().index);
    const Dims d = dims_of(q, k, v, causal);
    dispatch_float(q.dtype(), "attention_backward", [&](auto tag) {
        using T = decltype(tag);
        using C = device_compute_t<T>;
        Tensor delta = make_empty({d.B * d.NH * d.T}, lse.dtype(), q.device());   // (B,NH,T) D_i
        auto* delta_p = static_cast<C*>(delta.raw_data());
        const auto* lse_p = static_cast<const C*>(lse.raw_data());
        const int64_t rows = d.B * d.NH * d.T;
        delta_kernel<T><<<grid_for(rows * kWarp), kBlockSize, 0, current_stream()>>>(
            d, heads_of<const T>(dout), heads_of<const T>(out), delta_p);
        CUDA_CHECK(cudaGetLastError());
        if (has_elements(dq))
            launch<C>(dq_kernel<T>, d.B * d.NH * tiles_of(d.T), backward_smem(d), d, heads_of<const T>(q),
                      heads_of<const T>(k), heads_of<const T>(v), heads_of<const T>(dout), heads_of<T>(dq), lse_p,
                      static_cast<const C*>(delta_p), static_cast<C>(scale), tiles_of(d.T));
        if (has_elements(dk) || has_elements(dv))
            launch<C>(dkv_kernel<T>, d.B * d.NKV * tiles_of(d.S), backward_smem(d), d, heads_of<const T>(q),
                      heads_of<const T>(k), heads_of<const T>(v), heads_of<const T>(dout), heads_or_null<T>(dk),
                      heads_or_null<T>(dv), lse_p, static_cast<const C*>(delta_p), static_cast<C>(scale),
                      tiles_of(d.S));
    });
}

}  // namespace

AMPGRAD_REGISTER_KERNEL(kernels::attention_forward, kCUDA, forward_entry);
AMPGRAD_REGISTER_KERNEL(kernels::attention_backward, kCUDA, backward_entry);

}  // namespace ampgrad::cuda
