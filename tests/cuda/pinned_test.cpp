// pinned_test.cpp: page-locked host memory (Tensor::pin_memory) and asynchronous copies from it:
// a non_blocking copy to the GPU is only queued (no host sync, counted by HostSyncCounter), a
// blocking one waits for its stream once, a copy from pageable memory makes the driver wait (counted
// as kPageableCopyToDevice), and the values arrive intact; tensor() and arange() on the GPU upload
// from pinned memory without a host sync (into another dtype too: converted on the GPU). Skipped
// without a GPU.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("pin_memory: a pinned copy of the same values; pinning twice is a no-op" * skip_without_gpu()) {
    Tensor t = sample({64, 33}, kFloat32, 1);
    Tensor pinned = t.pin_memory();
    CHECK(pinned.is_pinned());
    CHECK(pinned.device() == kHost);
    CHECK_FALSE(t.is_pinned());
    CHECK(equal(pinned, t));
    CHECK(pinned.pin_memory().is_same(pinned));
    Tensor view = sample({8, 6}, kFloat16, 2).t();                     // non-contiguous, f16
    Tensor pinned_view = view.pin_memory();
    CHECK(pinned_view.is_contiguous());
    CHECK(equal(pinned_view, view));
    CHECK_THROWS_AS(to_gpu(t).pin_memory(), DeviceError);            // only CPU tensors
}

TEST_CASE("copies to the GPU: non_blocking from pinned memory makes no host sync" * skip_without_gpu()) {
    Tensor t = sample({1024, 257}, kFloat32, 3);
    Tensor pinned = t.pin_memory();
    Tensor on_gpu;
    {
        HostSyncCounter syncs;
        on_gpu = pinned.to(kGpu, /*non_blocking=*/true);
        CAPTURE(syncs.describe());
        CHECK(syncs.count() == 0);
    }
    current_stream(kGpu).synchronize();
    CHECK(equal(to_host(on_gpu), t));
    {
        HostSyncCounter syncs;                                          // into another dtype: converted on the GPU
        Tensor as_bf16 = make_empty({1024, 257}, kBFloat16, kGpu);
        kernels::copy(as_bf16, pinned);
        CAPTURE(syncs.describe());
        CHECK(syncs.count() == 0);
        CHECK(equal(to_host(as_bf16), t.to(kBFloat16)));
    }
    {
        HostSyncCounter syncs;
        Tensor blocking = pinned.to(kGpu);                              // waits once, so `pinned` may change
        CHECK(syncs.count() == 1);
        CHECK(syncs.count(HostSync::kStreamSynchronize) == 1);
        pinned.fill_(0.0);
        CHECK(equal(to_host(blocking), t));
    }
    {
        HostSyncCounter syncs;
        Tensor from_pageable = t.to(kGpu);
        CHECK(syncs.count(HostSync::kPageableCopyToDevice) == 1);
        CHECK(equal(to_host(from_pageable), t));
    }
}

TEST_CASE("the pinned allocator reuses a freed block only after the copy that read it" * skip_without_gpu()) {
    Tensor t = sample({4096, 256}, kFloat32, 4);
    Tensor on_gpu;
    {
        Tensor pinned = t.pin_memory();
        on_gpu = pinned.to(kGpu, /*non_blocking=*/true);                // recorded on the stream
    }                                                                   // freed while the copy may run
    Tensor reuse = full({4096, 256}, -1.0).pin_memory();                // must not overwrite it early
    current_stream(kGpu).synchronize();
    CHECK(equal(to_host(on_gpu), t));
    CHECK(reuse.is_pinned());
}

// tensor() and arange() on the GPU stage their host values in pinned memory: a forward that makes
// its position ids with arange(T, device) stays free of host synchronisations (the GPT's does).
TEST_CASE("tensor() and arange() on cuda:0 upload without a host sync, and the values arrive" * skip_without_gpu()) {
    Tensor positions, values;
    {
        HostSyncCounter syncs;
        positions = arange(1000, TensorOptions(kInt64).device(kGpu));                   // (1000)
        values = tensor(std::vector<float>{1.5f, -2.0f, 3.25f}, {3}, TensorOptions(kFloat32).device(kGpu));
        CAPTURE(syncs.describe());
        CHECK(syncs.count() == 0);
    }
    CHECK(positions.device() == kGpu);
    CHECK(equal(to_host(positions), arange(1000)));
    CHECK(host_values(values) == std::vector<double>{1.5, -2.0, 3.25});
}
