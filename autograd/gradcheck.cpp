// gradcheck.cpp: numerical Jacobian (central differences, on any device) against the analytical one
// (one autograd::grad call per output element). A contiguous f64 CPU input is perturbed through its
// host pointer; any other one element at a time with fill_ on a view (any layout, any floating
// dtype, any device), from a host copy of its original values, so the finite differences run where
// the op runs. As PyTorch's, an input that is not f64 is accepted with a warning: its differences
// are only as precise as its dtype (pass a looser eps and tolerance).
#include "autograd/gradcheck.hpp"

#include <cmath>

#include "autograd/autograd.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::autograd {

namespace {

std::vector<double> flat(const Tensor& t) { return t.defined() ? t.contiguous().to_vector<double>() : std::vector<double>{}; }

// Sets element j (row-major) of x on its device. Runs under no-grad.
void set_element(const Tensor& x, int64_t j, double value) {
    if (x.device().is_cpu() && x.dtype() == kFloat64 && x.is_contiguous()) {
        x.data_ptr<double>()[j] = value;
        return;
    }
    Tensor element = x;                              // narrowed to a () view into x's storage
    for (int64_t d = x.dim() - 1, rest = j; d >= 0; --d) {
        const int64_t index = rest % x.size(d);
        rest /= x.size(d);
        element = element.select(d, index);
    }
    element.fill_(value);
}

// J[out_elem][in_elem] for one (output, input) pair, numerically.
std::vector<std::vector<double>> numerical_jacobian(const GradcheckFn& fn, const tensor_list& inputs, size_t out_idx,
                                                    size_t in_idx, double eps) {
    const Tensor& x = inputs[in_idx];          // floating (checked by the caller)
    const std::vector<double> original = flat(x);
    int64_t n = x.numel();
    std::vector<std::vector<double>> cols;
    NoGradGuard no_grad;
    for (int64_t j = 0; j < n; ++j) {
        double orig = original[static_cast<size_t>(j)];
        set_element(x, j, orig + eps);
        std::vector<double> plus = flat(fn(inputs)[out_idx]);
        set_element(x, j, orig - eps);
        std::vector<double> minus = flat(fn(inputs)[out_idx]);
        set_element(x, j, orig);
        std::vector<double> col(plus.size());
        for (size_t k = 0; k < plus.size(); ++k) col[k] = (plus[k] - minus[k]) / (2 * eps);
        cols.push_back(std::move(col));
    }
    std::vector<std::vector<double>> rows(cols.empty() ? 0 : cols[0].size(), std::vector<double>(static_cast<size_t>(n)));
    for (size_t j = 0; j < cols.size(); ++j)
        for (size_t k = 0; k < cols[j].size(); ++k) rows[k][j] = cols[j][k];
    return rows;
}

void check_inputs(const tensor_list& inputs) {
    for (size_t i = 0; i < inputs.size(); ++i) {
        const Tensor& t = inputs[i];
        if (!t.defined() || !t.requires_grad() || t.dtype() == kFloat64) continue;
        fmt::print(stderr, "gradcheck: input #{} requires gradient and is not a double precision floating point "
                   "tensor ({}); this check is likely to fail unless eps and the tolerances are loosened\n", i,
                   t.describe());
    }
}

}  // namespace

bool gradcheck(const GradcheckFn& fn, const tensor_list& inputs, GradcheckOptions opts) {
    check_inputs(inputs);
    tensor_list outputs = fn(inputs);
    for (size_t o = 0; o < outputs.size(); ++o) {
        const Tensor& out = outputs[o];
        if (!out.defined() || !out.requires_grad()) continue;
        int64_t m = out.numel();
        for (size_t i = 0; i < inputs.size(); ++i) {
            if (!inputs[i].defined() || !inputs[i].requires_grad()) continue;
            auto numeric = numerical_jacobian(fn, inputs, o, i, opts.eps);
            for (int64_t r = 0; r < m; ++r) {
                Tensor seed = zeros(out.sizes(), out.options());
                seed.view({-1}).select(0, r).fill_(1.0);
                Tensor g = grad({fn(inputs)[o]}, {inputs[i]}, {seed}, false, false, true)[0];
                std::vector<double> analytic = g.defined() ? flat(g) : std::vector<double>(numeric[r].size(), 0.0);
                for (size_t c = 0; c < analytic.size(); ++c) {
                    double a = analytic[c], nmr = numeric[r][c];
                    if (std::abs(a - nmr) <= opts.atol + opts.rtol * std::abs(nmr)) continue;
                    if (!opts.raise_exception) return false;
                    throw AutogradError(fmt::format(
                        "gradcheck: Jacobian mismatch for output {} with respect to input {}, at output element {} / "
                        "input element {}: numerical {:.10g}, analytical {:.10g} (atol {}, rtol {})",
                        o, i, r, c, nmr, a, opts.atol, opts.rtol));
                }
            }
        }
    }
    return true;
}

bool gradgradcheck(const GradcheckFn& fn, const tensor_list& inputs, GradcheckOptions opts) {
    GradcheckFn first_order = [&fn](const tensor_list& in) {
        EnableGradGuard enable_grad;                // the numerical Jacobian calls this under no-grad
        tensor_list outs = fn(in);
        tensor_list diff_inputs, grads_out;
        for (const Tensor& t : in)
            if (t.defined() && t.requires_grad()) diff_inputs.push_back(t);
        tensor_list seeds;
        for (const Tensor& o : outs) seeds.push_back(ones_like(o));
        tensor_list g = grad(outs, diff_inputs, seeds, true, true, true);
        for (Tensor& t : g) if (t.defined() && t.requires_grad()) grads_out.push_back(t);
        return grads_out;
    };
    return gradcheck(first_order, inputs, opts);
}

}  // namespace ampgrad::autograd
