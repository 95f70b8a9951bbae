// set_data.cpp: see set_data.hpp.
#include "core/set_data.hpp"

#include "core/error.hpp"

namespace ampgrad {

void set_data(const Tensor& t, const Tensor& data, VersionBump bump) {
    if (!t.defined() || !data.defined()) throw ValueError("set_data: both the tensor and its new data must be defined");
    TensorImpl* impl = t.impl();
    impl->storage = data.impl()->storage;
    impl->sizes = data.sizes();
    impl->strides = data.strides();
    impl->offset = data.storage_offset();
    impl->dtype = data.dtype();
    if (bump == VersionBump::kYes) t.bump_version();
}

}  // namespace ampgrad
