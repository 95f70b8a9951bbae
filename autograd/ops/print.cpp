// print.cpp: `std::cout << tensor`, laid out as libtorch prints: the values (a matrix per trailing
// pair of dims, each headed "(i,j,.,.) =" for a tensor of more than two dims), then a footer naming
// the device, the dtype and the sizes: "[ CPUFloatType{2,3} ]". An undefined tensor prints
// "[ Tensor (undefined) ]". Values go through f64 on the host, so any device and dtype prints.
#include <ostream>

#include <fmt/format.h>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"

namespace ampgrad {

namespace {

std::string format_value(double v, bool integral) {
    return integral ? fmt::format("{}", static_cast<int64_t>(v)) : fmt::format("{:.4f}", v);
}

// rows x cols values starting at `first`, right-aligned in one column width
void print_matrix(std::ostream& os, const std::vector<double>& values, size_t first, int64_t rows, int64_t cols,
                  bool integral) {
    size_t width = 1;
    for (int64_t i = 0; i < rows * cols; ++i)
        width = std::max(width, format_value(values[first + static_cast<size_t>(i)], integral).size());
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < cols; ++c)
            os << fmt::format(" {:>{}}", format_value(values[first + static_cast<size_t>(r * cols + c)], integral),
                              width);
        os << '\n';
    }
}

std::string footer(const Tensor& t) {
    std::string sizes;
    for (int64_t s : t.sizes()) {
        if (!sizes.empty()) sizes += ',';
        sizes += std::to_string(s);
    }
    std::string device = t.device().is_cpu() ? "CPU" : "CUDA";
    return fmt::format("[ {}{}Type{{{}}} ]", device, scalar_type_name(t.dtype()), sizes);
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
    if (!t.defined()) return os << "[ Tensor (undefined) ]";
    NoGradGuard no_grad;
    const std::vector<double> values = t.detach().to(kFloat64).to_vector<double>();
    const bool integral = !is_floating(t.dtype());
    if (t.dim() == 0) {
        os << format_value(values[0], integral) << '\n';
    } else if (t.dim() == 1) {
        print_matrix(os, values, 0, t.size(0), 1, integral);
    } else {
        const int64_t rows = t.size(-2), cols = t.size(-1), per_matrix = rows * cols;
        const int64_t matrices = per_matrix == 0 ? 0 : t.numel() / per_matrix;
        for (int64_t m = 0; m < matrices; ++m) {
            if (t.dim() > 2) {                           // "(i,j,.,.) =": the leading indices of this matrix
                std::string index;
                int64_t rest = m;
                for (int64_t d = t.dim() - 3; d >= 0; --d) {
                    index.insert(0, std::to_string(rest % t.size(d)) + (index.empty() ? "" : ","));
                    rest /= t.size(d);
                }
                os << (m == 0 ? "" : "\n") << '(' << index << ",.,.) = \n";
            }
            print_matrix(os, values, static_cast<size_t>(m * per_matrix), rows, cols, integral);
        }
    }
    return os << footer(t);
}

}  // namespace ampgrad
