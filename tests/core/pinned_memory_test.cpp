// pinned_memory_test.cpp: what Tensor::pin_memory() and to(device, non_blocking) do without a GPU:
// typed errors that say why, and no change to plain CPU tensors. The GPU side is tests/cuda/pinned_test.cpp.
#include <doctest/doctest.h>

#include "core/device_registry.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;

TEST_CASE("pin_memory: a DeviceError naming the reason when it cannot pin") {
    Tensor t = full({2, 3}, 1.5);
    CHECK_FALSE(t.is_pinned());
    CHECK_THROWS_WITH_AS(t.pin_memory(kCPU), doctest::Contains("pin_memory: cpu has no page-locked host memory"),
                         DeviceError);
    if (!is_available(kCUDA)) CHECK_THROWS_WITH_AS(t.pin_memory(), doctest::Contains("cuda"), DeviceError);
    CHECK(t.to(Device(kCPU), /*non_blocking=*/true).is_same(t));      // same device: the tensor itself
    CHECK_FALSE(t.clone().is_pinned());
}
