// sequential.cpp: nn::Sequential's forward and checked indexing.
#include "nn/sequential.hpp"

#include "core/error.hpp"

namespace ampgrad::nn {

Tensor Sequential::forward(const Tensor& x) const {
    return with_forward_hooks(x, [&](const Tensor& in) {
        Tensor h = in;
        for (const auto& fn : forwards_) h = fn(h);
        return h;
    });
}

const std::shared_ptr<Module>& Sequential::ptr(size_t i) const {
    if (i >= modules_.size())
        throw IndexError(fmt::format("Sequential: index {} is out of range for {} modules", i, modules_.size()));
    return modules_[i];
}

void Sequential::throw_wrong_type(size_t i) const {
    throw ValueError(fmt::format("Sequential: module {} is a {}, not the type asked for", i, modules_[i]->name()));
}

}  // namespace ampgrad::nn
