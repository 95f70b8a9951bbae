// dist/staged_group.hpp: a process group that takes tensors on any device and runs its backend's
// collectives on copies at the device the backend reads (its "home").
//
// Gloo reads host memory; NCCL reads the memory of its rank's GPU and refuses two ranks on one
// device. So:
//   - ranks that share GPUs (a one-GPU machine running several ranks, as the determinism checks do)
//     talk over Gloo, and their CUDA tensors go through host copies, as PyTorch's Gloo backend does;
//   - a GPU run over NCCL still sends small host tensors now and then (a loss, a flag, a count),
//     and they go through copies on the rank's GPU.
// For each collective:
//   - each tensor it reads that is not at home is copied there first (Tensor::to, which waits for the
//     kernels that wrote it);
//   - each tensor it writes that is not at home gets its result back when the collective is done: at
//     once for a synchronous call, in Work::wait() for an async one (its caller must wait, as for any
//     work);
//   - tensors at home pass through untouched, so a CPU run over Gloo pays nothing.
// init_process_group wraps every backend's group in one (dist/process_group.cpp).
#pragma once
#include "dist/process_group.hpp"

#include <memory>

namespace ampgrad::dist {

std::unique_ptr<ProcessGroup> make_staged_group(std::unique_ptr<ProcessGroup> inner, Device home);

}  // namespace ampgrad::dist
