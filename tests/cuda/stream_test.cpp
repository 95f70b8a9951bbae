// stream_test.cpp: CUDA streams, events and the stream-ordered allocator (core/stream.hpp,
// cuda/stream.cu, cuda/allocator.cu) on cuda:0. Skipped without a GPU.
#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("cuda streams: default, pool, guard, query and synchronize" * skip_without_gpu()) {
    Stream def = current_stream(kGpu);
    CHECK(def.is_default());
    CHECK(def == default_stream(kGpu));
    Stream side = new_stream(kGpu);
    CHECK_FALSE(side.is_default());
    CHECK(side.device() == kGpu);
    {
        StreamGuard guard(side);
        CHECK(current_stream(kGpu) == side);
        Tensor x = to_gpu(sample({1 << 16}, kFloat32, 1));
        Tensor y = make_empty(x.sizes(), kFloat32, kGpu);
        kernels::unary(UnaryOp::kExp, y, x);                               // issued on `side`
        side.synchronize();
        CHECK(side.query());
        CHECK_CLOSE(to_host(y), exp(to_host(x)), tol_for(kFloat32));
    }
    CHECK(current_stream(kGpu).is_default());
    synchronize(kGpu);
}

TEST_CASE("cuda events order two streams and time work" * skip_without_gpu()) {
    Stream producer = current_stream(kGpu), consumer = new_stream(kGpu);
    Tensor x = to_gpu(sample({1 << 20}, kFloat32, 2));
    Tensor y = make_empty(x.sizes(), kFloat32, kGpu);
    Event start(true), ready(true);
    start.record(producer);
    kernels::unary(UnaryOp::kTanh, y, x);                                   // on the producer
    ready.record(producer);
    ready.wait(consumer);
    Tensor z = make_empty(x.sizes(), kFloat32, kGpu);
    {
        StreamGuard guard(consumer);
        kernels::unary(UnaryOp::kNeg, z, y);                                // reads y after the event
        y.record_stream(consumer);
    }
    consumer.synchronize();
    CHECK(ready.query());
    CHECK(start.elapsed_time(ready) >= 0.0);
    CHECK_CLOSE(to_host(z), -tanh(to_host(x)), tol_for(kFloat32));
}

TEST_CASE("cuda allocator: allocated, reserved, peaks, empty_cache and record_stream" * skip_without_gpu()) {
    {   // a cuBLASLt product first, so that the current stream's workspace is live whatever ran before
        Tensor a = to_gpu(sample({64, 32}, kFloat32, 4)), bias = to_gpu(sample({64}, kFloat32, 5));
        Tensor out = make_empty({64, 64}, kFloat32, kGpu);                                     // (64,64)
        kernels::gemm_epilogue(out, Tensor(), a, a, false, true, bias, GemmEpilogue::kBias);
    }
    synchronize(kGpu);
    empty_cache(kGpu);
    reset_peak_memory_stats(kGpu);
    AllocatorStats before = memory_stats(kGpu);
    {
        Tensor t = make_empty({1 << 20}, kFloat32, kGpu);                   // 4 MiB
        AllocatorStats during = memory_stats(kGpu);
        CHECK(during.allocated_bytes == before.allocated_bytes + (4 << 20));
        CHECK(during.reserved_bytes >= during.allocated_bytes);
        CHECK(during.num_allocs == before.num_allocs + 1);
        t.record_stream(new_stream(kGpu));
        CHECK_THROWS_AS(t.record_stream(current_stream(kCPU)), DeviceError);
    }
    CHECK(memory_allocated(kGpu) == before.allocated_bytes);
    CHECK(max_memory_allocated(kGpu) >= before.allocated_bytes + (4 << 20));
    CHECK(memory_reserved(kGpu) >= (4 << 20));                              // the pool keeps the freed block
    empty_cache(kGpu);
    // Back to the baseline, not to zero: blocks that earlier tests left live in this process (the
    // per-stream cuBLAS/cuBLASLt workspaces of cuda/gemm_lt.cu, 32 MiB each) keep their segments.
    CHECK(memory_reserved(kGpu) == before.reserved_bytes);
    reset_peak_memory_stats(kGpu);
    CHECK(max_memory_allocated(kGpu) == memory_allocated(kGpu));
}

TEST_CASE("cuda item() reads a value written by a kernel on a non-default stream" * skip_without_gpu()) {
    Stream side = new_stream(kGpu);
    StreamGuard guard(side);
    Tensor x = to_gpu(full({1 << 20}, 2.0, TensorOptions(kFloat32)));
    Tensor y = make_empty(x.sizes(), kFloat32, kGpu);
    kernels::binary_scalar(BinaryOp::kMul, y, x, 3.0, false);
    CHECK(y.narrow(0, (1 << 20) - 1, 1).item<float>() == 6.0f);             // the copy syncs `side`
}
