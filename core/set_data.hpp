// set_data.hpp: the one way to make an existing tensor object show other data, as PyTorch's
// `param.data = new_data` does: the same Tensor (its identity, its grad, its autograd metadata, every
// copy of the handle) now views new_data's storage with new_data's sizes, strides, offset and dtype.
// nn::Module::to (a parameter converted in place) and ZeRO stage 3 (a parameter gathered from its
// partitions, then released to an empty tensor) use it; nothing else rewrites a tensor's storage.
//
//   set_data(param, converted, VersionBump::kYes);   // values changed: saved tensors go stale
//   set_data(param, gathered, VersionBump::kNo);     // same values elsewhere: a saved param stays valid
#pragma once
#include "core/tensor.hpp"

namespace ampgrad {

enum class VersionBump { kYes, kNo };

// t takes data's storage, sizes, strides, offset and dtype. kYes bumps t's version counter (as a
// write does), so that backward refuses a graph that saved t's old values; kNo keeps it, for data
// that holds the same values (ZeRO's gather and release change where they live, not what they are).
void set_data(const Tensor& t, const Tensor& data, VersionBump bump);

}  // namespace ampgrad
