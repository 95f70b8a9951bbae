// device_test.cpp: Device parsing and printing, and what happens when CUDA cannot be used:
// every request for a cuda device fails with a DeviceError that names the device and says why
// (built without CUDA, or no GPU/driver). Passes in both the CUDA-built and the stub build.
#include <doctest/doctest.h>

#include "ampgrad/ampgrad.h"
#include "ampgrad_config.h"

using namespace ampgrad;

TEST_CASE("Device parses cpu, cuda and cuda:N and prints them back") {
    CHECK(Device("cpu").is_cpu());
    CHECK(Device("cpu").str() == "cpu");
    CHECK(Device("cuda").is_cuda());
    CHECK(Device("cuda").index == 0);
    CHECK(Device("cuda:0") == Device(kCUDA, 0));
    CHECK(Device("cuda:3").index == 3);
    CHECK(Device("cuda:3").str() == "cuda:3");
    CHECK(Device(kCPU, 5).index == 0);                                     // the CPU has no ordinal
    CHECK(Device("cpu:0") == Device(kCPU));                                 // as PyTorch: cpu:0 is the CPU
    CHECK(Device(kCUDA, 1) != Device(kCUDA, 0));
    CHECK(Device(kCUDA) != Device(kCPU));
    CHECK(device_type_name(kCUDA) == "cuda");
    CHECK(TensorOptions(Device("cuda:1")).device() == Device(kCUDA, 1));
    CHECK(TensorOptions().device() == Device(kCPU));
}

TEST_CASE("Device rejects malformed specs with a ValueError that quotes them") {
    for (const char* bad : {"gpu", "CUDA", "cuda:", "cuda:-1", "cuda:1x", "cuda0", "cpu:1", "cpu:", ""}) {
        CAPTURE(bad);
        std::string expected = fmt::format("cannot parse device spec '{}'", bad);
        CHECK_THROWS_WITH_AS(Device{std::string_view(bad)}, doctest::Contains(expected.c_str()), ValueError);
    }
}

TEST_CASE("cuda::device_count and is_available agree") {
    CHECK(cuda::device_count() >= 0);
    CHECK(cuda::is_available() == (cuda::device_count() > 0));
#if !AMPGRAD_WITH_CUDA
    CHECK(cuda::device_count() == 0);
#endif
}

TEST_CASE("without a usable GPU, cuda tensors fail with a DeviceError that says why") {
    if (cuda::is_available()) return;                        // a GPU is present: tests/cuda covers it
#if AMPGRAD_WITH_CUDA
    const char* why = "no CUDA device is available";
#else
    const char* why = "ampgrad was built without CUDA support";
#endif
    CHECK_THROWS_WITH_AS(zeros({2, 3}, TensorOptions().device(Device("cuda:0"))), doctest::Contains("cuda:0: "),
                         DeviceError);
    CHECK_THROWS_WITH_AS(empty({4}, TensorOptions().device(kCUDA)), doctest::Contains(why), DeviceError);
    CHECK_THROWS_WITH_AS(ones({1}, TensorOptions().device(Device("cuda:1"))), doctest::Contains("cuda:1: "),
                         DeviceError);
    CHECK_THROWS_WITH_AS(require_device(Device(kCUDA)), doctest::Contains(why), DeviceError);
    CHECK_THROWS_AS(allocator_for(Device(kCUDA)), DeviceError);

    Tensor x = ones({2, 2});
    CHECK_THROWS_WITH_AS(x.to(kCUDA), doctest::Contains(why), DeviceError);
    CHECK_THROWS_WITH_AS(x.to(Device("cuda:0")), doctest::Contains("cuda:0: "), DeviceError);
    CHECK(x.device() == Device(kCPU));                       // the failed move left x alone
    CHECK(x.to_vector<float>() == std::vector<float>(4, 1.0f));
}

TEST_CASE("without CUDA the message says how to get it") {
    if (cuda::is_available()) return;
#if AMPGRAD_WITH_CUDA
    CHECK_THROWS_WITH_AS(require_device(Device(kCUDA)), doctest::Contains("cudaGetDeviceCount"), DeviceError);
    CHECK_THROWS_WITH_AS(require_device(Device(kCUDA)), doctest::Contains("use Device(kCPU)"), DeviceError);
#else
    CHECK_THROWS_WITH_AS(require_device(Device(kCUDA)), doctest::Contains("rebuild with -Dcuda=enabled"), DeviceError);
#endif
}
