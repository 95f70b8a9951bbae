// rotary.cpp: the rotary embedding kernel, out = x cos + R(x) sin (or its transpose, the backward's
// dx), one pass over the pairs of each row. kernels/rotary_layout.hpp splits the operands into pair
// views; the pair formula is kernels/scalar_math.hpp's Rotary, shared with cuda/rotary.cu. Loads go to
// compute_t<T> (fp32 for f16/bf16) and each output rounds once. Derivation: docs/ops/rotary.md.
#include "kernels/kernels.hpp"
#include "kernels/rotary_layout.hpp"
#include "kernels/scalar_math.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {

template <typename T>
compute_t<T> load(const char* p) { return static_cast<compute_t<T>>(*reinterpret_cast<const T*>(p)); }

template <typename T>
void rotary_typed(const RotaryPairs& pairs, bool transpose) {
    using C = compute_t<T>;
    std::array<int64_t, 4> partner;                             // in bytes
    for (size_t k = 0; k < 4; ++k) partner[k] = pairs.partner[k] * static_cast<int64_t>(sizeof(T));
    auto L = make_run_layout<4>({&pairs.first[0], &pairs.first[1], &pairs.first[2], &pairs.first[3]});
    for_each_run(L, [&](std::array<char*, 4> p, std::array<int64_t, 4> s, int64_t n) {
        for (int64_t i = 0; i < n; ++i) {
            const char* x = p[1] + i * s[1];
            const char* c = p[2] + i * s[2];
            const char* sn = p[3] + i * s[3];
            C o1, o2;
            if (transpose)
                formulas::Rotary::transpose(load<T>(x), load<T>(x + partner[1]), load<T>(c), load<T>(c + partner[2]),
                                            load<T>(sn), load<T>(sn + partner[3]), o1, o2);
            else
                formulas::Rotary::forward(load<T>(x), load<T>(x + partner[1]), load<T>(c), load<T>(c + partner[2]),
                                          load<T>(sn), load<T>(sn + partner[3]), o1, o2);
            char* out = p[0] + i * s[0];
            *reinterpret_cast<T*>(out) = static_cast<T>(o1);
            *reinterpret_cast<T*>(out + partner[0]) = static_cast<T>(o2);
        }
    });
}

}  // namespace

void rotary_embedding(const Tensor& out, const Tensor& x, const Tensor& cos, const Tensor& sin, bool interleaved,
                      bool transpose) {
    RotaryPairs pairs = rotary_pairs("rotary_embedding", out, x, cos, sin, interleaved);
    if (out.numel() == 0) return;
    dispatch_float(out.dtype(), "rotary_embedding", [&](auto tag) { rotary_typed<decltype(tag)>(pairs, transpose); });
}

AMPGRAD_REGISTER_KERNEL(kernels::rotary_embedding, kCPU, rotary_embedding);

}  // namespace ampgrad::cpu
