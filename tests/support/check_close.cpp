// check_close.cpp: see check_close.hpp.
#include "tests/support/check_close.hpp"

#include <cmath>

namespace ampgrad::testing {

Tolerance tol_for(DType dtype, double ops) {
    double eps = dtype_eps(dtype);
    if (dtype == kFloat64) return {1e-10, 1e-8};
    if (dtype == kFloat32) return {1e-5, 1e-4};
    return {eps * ops, eps * ops};
}

std::string compare_tensors(const Tensor& actual, const Tensor& expected, Tolerance tol) {
    if (!actual.defined() || !expected.defined())
        return fmt::format("undefined tensor: actual {}, expected {}", actual.describe(), expected.describe());
    if (actual.numel() != expected.numel() || (actual.sizes() != expected.sizes() && expected.dim() > 0 && actual.dim() > 0))
        return fmt::format("shape mismatch: actual {}, expected {}", actual.describe(), expected.describe());
    std::vector<double> a = actual.detach().contiguous().to_vector<double>();
    std::vector<double> e = expected.detach().contiguous().to_vector<double>();
    double worst = 0;
    size_t worst_i = 0;
    size_t bad = 0;
    for (size_t i = 0; i < a.size(); ++i) {
        bool both_nan = std::isnan(a[i]) && std::isnan(e[i]);
        bool same_inf = std::isinf(a[i]) && a[i] == e[i];
        if (both_nan || same_inf) continue;
        double err = std::abs(a[i] - e[i]);
        double excess = std::isnan(err) ? INFINITY : err - (tol.atol + tol.rtol * std::abs(e[i]));
        if (excess > 0) {
            ++bad;
            if (excess > worst || bad == 1) { worst = excess; worst_i = i; }
        }
    }
    if (bad == 0) return {};
    return fmt::format("{} of {} elements differ (atol {}, rtol {}); worst at flat index {}: actual {:.9g}, expected "
                       "{:.9g} ({} vs {})", bad, a.size(), tol.atol, tol.rtol, worst_i, a[worst_i], e[worst_i],
                       actual.describe(), expected.describe());
}

std::vector<Device> devices_under_test() {
    std::vector<Device> devs{Device(kCPU)};
    if (cuda::is_available()) devs.emplace_back(kCUDA, 0);
    return devs;
}

}  // namespace ampgrad::testing
