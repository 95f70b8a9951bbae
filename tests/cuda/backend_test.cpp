// backend_test.cpp: cuda/backend.cu and cuda/allocator.cu: device discovery, the allocator's
// live/peak counters, clear errors for bad device indices, operands on the wrong device and
// a kernel with no CUDA implementation (the registry's NotImplementedError; every kernel of
// kernels/kernels.hpp has one now, so the test brings its own CPU-only kernel).
#include <cstdlib>
#include <string>

#include "tests/cuda/cuda_test_util.hpp"

using namespace ampgrad;
using namespace ampgrad::testing;

TEST_CASE("cuda discovery is consistent (runs with or without a GPU)") {
    CHECK(cuda::device_count() >= 0);
    CHECK(cuda::is_available() == (cuda::device_count() > 0));
}

// scripts/gpu/run.sh sets AMPGRAD_EXPECT_GPU=1: there, every other case skipping itself (a driver older
// than the CUDA 13 runtime, no device visible) must be a failure, naming cudaGetDeviceCount's error.
TEST_CASE("a usable GPU where one is expected (AMPGRAD_EXPECT_GPU=1, set by scripts/gpu/run.sh)") {
    const char* expect = std::getenv("AMPGRAD_EXPECT_GPU");
    if (expect == nullptr || std::string(expect) != "1") return;
    CHECK_NOTHROW(require_device(kGpu));
}

TEST_CASE("cuda device: usable, one allocator per device" * skip_without_gpu()) {
    CHECK_NOTHROW(require_device(kGpu));
    CHECK(&allocator_for(Device("cuda:0")) == &allocator_for(kGpu));
    CHECK(&allocator_for(Device("cuda")) == &allocator_for(kGpu));
}

TEST_CASE("cuda allocator: live and peak bytes follow tensor lifetimes" * skip_without_gpu()) {
    Allocator& alloc = allocator_for(kGpu);
    AllocatorStats before = alloc.stats();
    alloc.reset_peak_stats();
    {
        Tensor t = make_empty({1 << 18}, kFloat32, kGpu);                  // 1 MiB
        AllocatorStats during = alloc.stats();
        CHECK(during.allocated_bytes == before.allocated_bytes + (1 << 20));
        CHECK(during.peak_allocated_bytes >= during.allocated_bytes);
        CHECK(during.num_allocs == before.num_allocs + 1);
    }
    AllocatorStats after = alloc.stats();
    CHECK(after.allocated_bytes == before.allocated_bytes);
    CHECK(after.peak_allocated_bytes >= before.allocated_bytes + (1 << 20));
    alloc.reset_peak_stats();
    CHECK(alloc.stats().peak_allocated_bytes == after.allocated_bytes);
}

TEST_CASE("cuda errors: bad device index, operands on the host, a kernel with no CUDA implementation"
          * skip_without_gpu()) {
    int count = cuda::device_count();
    Device missing(kCUDA, count);
    std::string expected = fmt::format("cuda:{}: device index out of range ({} device", count, count);
    CHECK_THROWS_WITH_AS(make_empty({2}, kFloat32, missing), doctest::Contains(expected.c_str()), DeviceError);
    CHECK_THROWS_AS(require_device(missing), DeviceError);

    Tensor host_in = sample({3}, kFloat32, 1);
    Tensor out = make_empty({3}, kFloat32, kGpu);
    CHECK_THROWS_WITH_AS(kernels::unary(UnaryOp::kExp, out, host_in),
                         doctest::Contains("is not on cuda:0"), DeviceError);

    Tensor x = zeros({2, 3}, TensorOptions().device(kGpu)), y = make_empty({2, 3}, kFloat32, kGpu);
    CHECK_NOTHROW(kernels::softmax(y, x, false));                          // written now: softmax of zeros
    CHECK(y.to_vector<float>() == std::vector<float>(6, 1.0f / 3.0f));
    Tensor x_host = zeros({2, 3});
    CHECK_THROWS_WITH_AS(kernels::softmax(y, x_host, false), doctest::Contains("is not on cuda:0"), DeviceError);

    static constinit Kernel<void(const Tensor& out, double value)> cpu_only{"cpu_only_kernel"};
    cpu_only.register_impl(kCPU, [](const Tensor& t, double value) { kernels::fill(t, value); });
    CHECK_NOTHROW(cpu_only(make_empty({2}, kFloat32, kHost), 1.0));
    CHECK_THROWS_WITH_AS(cpu_only(out, 1.0), doctest::Contains("kernel 'cpu_only_kernel' has no cuda implementation"),
                         NotImplementedError);
    CHECK(kernels::missing(kCUDA).empty());
}

TEST_CASE("cuda: factories and to_vector work through the CUDA backend" * skip_without_gpu()) {
    Tensor z = zeros({2, 3}, TensorOptions().device(kGpu));
    CHECK(z.device() == kGpu);
    CHECK(z.to_vector<float>() == std::vector<float>(6, 0.0f));
    Tensor t = tensor(std::vector<double>{1.5, -2.0, 3.25}, {3}, TensorOptions(kFloat64).device(kGpu));
    CHECK(t.to_vector<double>() == std::vector<double>{1.5, -2.0, 3.25});
    CHECK(t.to_vector<int64_t>() == std::vector<int64_t>{1, -2, 3});
    manual_seed(5);
    Tensor r_gpu = randn({33}, TensorOptions().device(kGpu));
    manual_seed(5);
    Tensor r_cpu = randn({33});
    CHECK_EXACT(r_gpu, r_cpu);                                             // same seed, same numbers
}
