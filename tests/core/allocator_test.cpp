// allocator_test.cpp: the allocator interface and the public memory statistics (core/allocator.hpp)
// on the CPU: allocated/reserved bytes and counts move as tensors are made and freed, peaks and
// their reset, the large-block cache and empty_cache, record_stream, and typed errors for streams of
// another device.
#include <doctest/doctest.h>

#include "ampgrad/ampgrad.h"

using namespace ampgrad;

namespace {
const Device kHost(kCPU);
}  // namespace

TEST_CASE("memory stats move by the tensor's bytes when it is made and freed") {
    AllocatorStats before = memory_stats(kHost);
    CHECK(before.reserved_bytes >= before.allocated_bytes);
    {
        Tensor t = empty({1000}, TensorOptions(kFloat32));               // 4000 bytes
        AllocatorStats during = memory_stats(kHost);
        CHECK(during.allocated_bytes - before.allocated_bytes == 4000);
        CHECK(memory_allocated(kHost) == during.allocated_bytes);
        CHECK(during.reserved_bytes - before.reserved_bytes >= 4000);       // rounded up, plus a header
        CHECK(during.reserved_bytes - before.reserved_bytes < 4000 + 256);
        CHECK(during.num_allocs == before.num_allocs + 1);
        CHECK(during.num_device_allocs == before.num_device_allocs + 1);  // no cache: every block is a malloc
        Tensor view = t.narrow(0, 10, 100);                                  // views share the storage
        CHECK(memory_stats(kHost).allocated_bytes == during.allocated_bytes);
    }
    AllocatorStats after = memory_stats(kHost);
    CHECK(after.allocated_bytes == before.allocated_bytes);
    CHECK(after.reserved_bytes == before.reserved_bytes);
    CHECK(after.num_frees == before.num_frees + 1);
    CHECK(after.num_device_frees == before.num_device_frees + 1);
}

TEST_CASE("peaks hold the high-water mark until reset_peak_memory_stats") {
    reset_peak_memory_stats(kHost);
    AllocatorStats base = memory_stats(kHost);
    CHECK(base.peak_allocated_bytes == base.allocated_bytes);
    CHECK(base.peak_reserved_bytes == base.reserved_bytes);
    {
        Tensor big = empty({1 << 20}, TensorOptions(kFloat64));            // 8 MiB
        CHECK(max_memory_allocated(kHost) == base.allocated_bytes + (8 << 20));
    }
    CHECK(memory_allocated(kHost) == base.allocated_bytes);
    CHECK(max_memory_allocated(kHost) == base.allocated_bytes + (8 << 20));   // survives the free
    CHECK(max_memory_reserved(kHost) >= base.reserved_bytes + (8 << 20));
    reset_peak_memory_stats(kHost);
    CHECK(max_memory_allocated(kHost) == memory_allocated(kHost));
    CHECK(max_memory_reserved(kHost) == memory_reserved(kHost));
}

TEST_CASE("large freed blocks stay reserved for reuse until empty_cache, which leaves live blocks alone") {
    empty_cache(kHost);
    Tensor keep = ones({1 << 16});                                           // 256 KiB, live throughout
    AllocatorStats before = memory_stats(kHost);
    { Tensor big = empty({1 << 18}, TensorOptions(kFloat32)); }               // 1 MiB, freed into the cache
    AllocatorStats cached = memory_stats(kHost);
    CHECK(cached.allocated_bytes == before.allocated_bytes);
    CHECK(cached.reserved_bytes >= before.reserved_bytes + (1 << 20));       // still held
    CHECK(cached.num_device_allocs == before.num_device_allocs + 1);
    { Tensor again = empty({1 << 18}, TensorOptions(kFloat32)); }             // same size: a cache hit
    CHECK(memory_stats(kHost).num_device_allocs == cached.num_device_allocs);
    CHECK(memory_stats(kHost).num_allocs == cached.num_allocs + 1);
    empty_cache(kHost);
    AllocatorStats emptied = memory_stats(kHost);
    CHECK(emptied.allocated_bytes == before.allocated_bytes);
    CHECK(emptied.reserved_bytes == before.reserved_bytes);                   // back to the live blocks
    CHECK(emptied.num_device_frees >= cached.num_device_frees + 1);
    CHECK(keep.sum().item<float>() == static_cast<float>(1 << 16));
}

TEST_CASE("the allocator is found per device and allocates on a stream of its own device") {
    Allocator& a = allocator_for(kHost);
    CHECK(a.device() == kHost);
    CHECK(&a == &allocator_for(Device("cpu")));
    Stream side = new_stream(kCPU);
    AllocatorStats before = a.stats();
    void* p = a.allocate(100, side);
    CHECK(p != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);                      // 64-byte aligned
    CHECK(a.stats().allocated_bytes == before.allocated_bytes + 100);
    a.record_stream(p, current_stream(kCPU));
    a.deallocate(p, 100);
    CHECK(a.stats().allocated_bytes == before.allocated_bytes);
    CHECK_THROWS_WITH_AS(a.allocate(100, Stream(Device(kCUDA, 0), 0)), doctest::Contains("not a CPU stream"),
                         DeviceError);
    CHECK(a.stats().allocated_bytes == before.allocated_bytes);           // the failed call took nothing
}

TEST_CASE("record_stream is accepted for a stream of the tensor's device and rejected for another") {
    Tensor t = ones({8});
    t.record_stream(current_stream(kCPU));
    t.record_stream(new_stream(kCPU));
    Tensor view = t.narrow(0, 2, 4);
    view.record_stream(new_stream(kCPU));                                  // a view records its storage
    CHECK_THROWS_WITH_AS(t.record_stream(Stream(Device(kCUDA, 0), 0)),
                         doctest::Contains("the storage is on cpu but default stream on cuda:0 is on cuda:0"),
                         DeviceError);
    CHECK(t.sum().item<float>() == 8.0f);
}

TEST_CASE("without a usable GPU, CUDA memory stats fail with a DeviceError") {
    if (cuda::is_available()) return;                                      // tests/cuda covers a present GPU
    CHECK_THROWS_AS(memory_stats(kCUDA), DeviceError);
    CHECK_THROWS_AS(empty_cache(Device("cuda:0")), DeviceError);
    CHECK_THROWS_AS(reset_peak_memory_stats(kCUDA), DeviceError);
}

TEST_CASE("a tensor whose bytes overflow 64 bits is a ShapeError; one larger than memory an OutOfMemoryError") {
    CHECK_THROWS_WITH_AS(empty({int64_t{1} << 62, 8}), doctest::Contains("overflows 64 bits"), ShapeError);
    CHECK_THROWS_WITH_AS(zeros({int64_t{1} << 31, int64_t{1} << 31, 4}, TensorOptions().dtype(kFloat64)),
                         doctest::Contains("(2147483648,2147483648,4) in f64"), ShapeError);
#if !defined(__SANITIZE_ADDRESS__)   // ASan's allocator aborts on an 8 PiB request instead of returning null
    const int64_t before = memory_allocated(Device(kCPU));
    CHECK_THROWS_WITH_AS(empty({int64_t{1} << 50}), doctest::Contains("cpu: out of memory"), OutOfMemoryError);
    CHECK(memory_allocated(Device(kCPU)) == before);   // nothing was counted for the refused block
    CHECK(empty({4}).numel() == 4);                    // and the allocator still serves
#endif
}
