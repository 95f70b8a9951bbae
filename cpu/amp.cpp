// amp.cpp: the two GradScaler kernels on the CPU (cuda/amp.cu is the twin, same contract):
//   non_finite_check_and_unscale: found_inf = 1 if any grad element is inf/NaN; grad *= inv_scale,
//       in ONE parallel pass over all the grads (a CPU "multi-tensor apply");
//   update_scale: PyTorch's _amp_update_scale_ with a `>=` growth check and [min_scale, max_scale].
// Both read and write only tensors: nothing is returned to the caller (no host read-back).
#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "kernels/kernels.hpp"
#include "cpu/loops.hpp"

namespace ampgrad::cpu {

namespace {

// ---- kernels ----

// Unscale n contiguous elements; returns whether any was inf or NaN. Grads are unscaled even
// when a non-finite value is found (PyTorch does the same; the step is skipped anyway).
// Written branch-free with an int flag so the f32/f64 loops vectorise.
template <typename T>
bool unscale_contiguous(T* grad, int64_t n, float inv_scale) {
    using C = compute_t<T>;
    const C inv = static_cast<C>(inv_scale);
    int bad = 0;
    if (inv == C(1)) {                                  // check only (the loss scalers' overflow test)
        for (int64_t i = 0; i < n; ++i) bad |= !std::isfinite(static_cast<C>(grad[i]));
        return bad != 0;
    }
    for (int64_t i = 0; i < n; ++i) {
        C v = static_cast<C>(grad[i]);
        bad |= !std::isfinite(v);
        grad[i] = static_cast<T>(v * inv);
    }
    return bad != 0;
}

// A strided (non-contiguous) grad: walk it run by run.
template <typename T>
bool unscale_strided(const Tensor& grad, float inv_scale) {
    std::atomic<bool> found{false};
    auto L = make_run_layout<1>({&grad});
    for_each_run(L, [&](std::array<char*, 1> p, std::array<int64_t, 1> s, int64_t n) {
        using C = compute_t<T>;
        const C inv = static_cast<C>(inv_scale);
        int bad = 0;
        for (int64_t i = 0; i < n; ++i) {
            T* x = reinterpret_cast<T*>(p[0] + i * s[0]);
            C v = static_cast<C>(*x);
            bad |= !std::isfinite(v);
            *x = static_cast<T>(v * inv);                   // v * 1 == v: no special case needed here
        }
        if (bad) found.store(true, std::memory_order_relaxed);
    });
    return found.load();
}

bool unscale_range(const Tensor& grad, int64_t begin, int64_t end, float inv_scale) {
    return dispatch_float(grad.dtype(), "non_finite_check_and_unscale", [&](auto tag) {
        using T = decltype(tag);
        return unscale_contiguous<T>(grad.data_ptr<T>() + begin, end - begin, inv_scale);
    });
}

void require_scalar(const char* kernel, const char* what, const Tensor& t, bool integer) {
    bool ok = t.defined() && t.numel() == 1 && t.device().is_cpu() &&
              (integer ? (t.dtype() == kInt32 || t.dtype() == kInt64) : t.dtype() == kFloat32);
    if (!ok)
        throw DTypeError(fmt::format("cpu {}: {} must be a 1-element {} cpu tensor, got {}", kernel, what,
                                     integer ? "i32 or i64" : "f32", t.defined() ? t.describe() : "undefined"));
}

int64_t read_tracker(const Tensor& t) {
    return t.dtype() == kInt32 ? *t.data_ptr<int32_t>() : *t.data_ptr<int64_t>();
}
void write_tracker(const Tensor& t, int64_t v) {
    if (t.dtype() == kInt32) *t.data_ptr<int32_t>() = static_cast<int32_t>(v);
    else *t.data_ptr<int64_t>() = v;
}

}  // namespace

// ---- launchers ----

// Contiguous grads are treated as one flat range of elements split evenly across the threads, so
// a thousand small grads cost one parallel region, not a thousand.
void non_finite_check_and_unscale(std::span<Tensor> grads, const Tensor& found_inf,
                                  const Tensor& inv_scale) {
    require_scalar("non_finite_check_and_unscale", "found_inf", found_inf, false);
    require_scalar("non_finite_check_and_unscale", "inv_scale", inv_scale, false);
    const float inv = *inv_scale.data_ptr<float>();
    bool found = false;

    std::vector<const Tensor*> flat;            // contiguous grads, walked as one range
    std::vector<int64_t> starts{0};             // starts[k]: first flat index of flat[k]
    for (const Tensor& g : grads) {
        if (!g.defined() || g.numel() == 0) continue;
        if (!g.device().is_cpu())
            throw DeviceError(fmt::format("cpu non_finite_check_and_unscale: grad is {}", g.describe()));
        if (!is_floating(g.dtype()))             // checked here: no throwing inside the parallel region
            throw_bad_dtype("non_finite_check_and_unscale", g.dtype(), "a floating dtype (f32, f64, f16, bf16)");
        if (g.is_contiguous()) {
            flat.push_back(&g);
            starts.push_back(starts.back() + g.numel());
        } else {
            found |= dispatch_float(g.dtype(), "non_finite_check_and_unscale", [&](auto tag) {
                return unscale_strided<decltype(tag)>(g, inv);
            });
        }
    }
    std::atomic<bool> found_flat{false};
    parallel_for(starts.back(), kGrainSize, [&](int64_t begin, int64_t end) {
        // the first grad overlapping [begin, end), then every grad up to end
        size_t k = std::upper_bound(starts.begin(), starts.end(), begin) - starts.begin() - 1;
        bool local = false;
        for (; k < flat.size() && starts[k] < end; ++k) {
            int64_t b = std::max(begin, starts[k]) - starts[k];
            int64_t e = std::min(end, starts[k + 1]) - starts[k];
            local |= unscale_range(*flat[k], b, e, inv);
        }
        if (local) found_flat.store(true, std::memory_order_relaxed);
    });
    if (found || found_flat.load()) *found_inf.data_ptr<float>() = 1.0f;   // never cleared here
}

// found_inf: scale = max(scale * backoff, min_scale); tracker = 0
// otherwise: tracker += 1; once tracker >= interval: scale = min(scale * growth, max_scale) if
//            scale * growth is finite in f32; tracker = 0
// Products are taken in double and rounded to f32 once, as PyTorch does.
void update_scale(const Tensor& scale, const Tensor& growth_tracker, const Tensor& found_inf,
                  double growth_factor, double backoff_factor, int64_t growth_interval, double min_scale,
                  double max_scale) {
    require_scalar("update_scale", "scale", scale, false);
    require_scalar("update_scale", "found_inf", found_inf, false);
    require_scalar("update_scale", "growth_tracker", growth_tracker, true);
    float& s = *scale.data_ptr<float>();
    if (*found_inf.data_ptr<float>() != 0.0f) {
        s = static_cast<float>(std::max(static_cast<double>(s) * backoff_factor, min_scale));
        write_tracker(growth_tracker, 0);
        return;
    }
    int64_t successful = read_tracker(growth_tracker) + 1;
    if (successful >= growth_interval) {          // PyTorch uses ==, which a lowered interval skips forever
        float grown = static_cast<float>(static_cast<double>(s) * growth_factor);
        if (std::isfinite(grown)) s = static_cast<float>(std::min(static_cast<double>(grown), max_scale));
        write_tracker(growth_tracker, 0);
    } else {
        write_tracker(growth_tracker, successful);
    }
}

AMPGRAD_REGISTER_KERNEL(kernels::non_finite_check_and_unscale, kCPU, non_finite_check_and_unscale);
AMPGRAD_REGISTER_KERNEL(kernels::update_scale, kCPU, update_scale);

}  // namespace ampgrad::cpu
