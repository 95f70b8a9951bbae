// stream_test.cpp: streams, the per-thread current stream, StreamGuard and events (core/stream.hpp)
// on the CPU, where work is synchronous: streams are always idle and events finish when recorded.
// Without a usable GPU, every CUDA stream request fails with a typed DeviceError.
#include <doctest/doctest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

#include "ampgrad/ampgrad.h"

using namespace ampgrad;

TEST_CASE("the CPU's current stream is its default stream until set") {
    Stream s = current_stream(kCPU);
    CHECK(s == default_stream(kCPU));
    CHECK(s.is_default());
    CHECK(s.id() == 0);
    CHECK(s.device() == Device(kCPU));
    CHECK(s == Stream());
    CHECK(s.str() == "default stream on cpu");
    CHECK(s.query());
    s.synchronize();                                     // nothing pending: returns
    synchronize(kCPU);
}

TEST_CASE("new_stream hands out distinct CPU streams, each idle") {
    Stream a = new_stream(kCPU), b = new_stream(kCPU);
    CHECK_FALSE(a == b);
    CHECK_FALSE(a.is_default());
    CHECK(a.device() == Device(kCPU));
    CHECK(a.query());
    CHECK(b.query());
    CHECK(a.str().find("on cpu") != std::string::npos);
}

TEST_CASE("StreamGuard makes a stream current and restores the previous one, also when nested or unwinding") {
    Stream outer = new_stream(kCPU), inner = new_stream(kCPU);
    CHECK(current_stream(kCPU).is_default());
    {
        StreamGuard g1(outer);
        CHECK(current_stream(kCPU) == outer);
        CHECK(g1.original_stream().is_default());
        CHECK(g1.current_stream() == outer);
        {
            StreamGuard g2(inner);
            CHECK(current_stream(kCPU) == inner);
            CHECK(g2.original_stream() == outer);
        }
        CHECK(current_stream(kCPU) == outer);
        try {
            StreamGuard g3(inner);
            throw std::runtime_error("unwind");
        } catch (const std::runtime_error&) {
        }
        CHECK(current_stream(kCPU) == outer);
        Tensor t = ones({3});                            // tensors are made on the current stream
        CHECK(t.sum().item<float>() == 3.0f);
    }
    CHECK(current_stream(kCPU).is_default());
}

TEST_CASE("set_current_stream lasts until changed and is per thread") {
    Stream s = new_stream(kCPU);
    set_current_stream(s);
    CHECK(current_stream(kCPU) == s);
    Stream seen_by_other;
    std::thread other([&] { seen_by_other = current_stream(kCPU); });
    other.join();
    CHECK(seen_by_other.is_default());                   // another thread starts at the default
    set_current_stream(default_stream(kCPU));
    CHECK(current_stream(kCPU).is_default());
}

TEST_CASE("an Event before record() is finished and has no device; after record() it is finished at once") {
    Event e;
    CHECK_FALSE(e.is_recorded());
    CHECK(e.query());
    e.synchronize();
    e.wait(current_stream(kCPU));                        // nothing recorded: nothing to wait for
    e.record(current_stream(kCPU));
    CHECK(e.is_recorded());
    CHECK(e.device() == Device(kCPU));
    CHECK(e.query());
    e.synchronize();
    Stream side = new_stream(kCPU);
    e.wait(side);
    e.record(side);                                      // re-recording on the same device is fine
    CHECK(e.query());
}

TEST_CASE("Event.elapsed_time measures the host time between two records on the CPU") {
    Event start(true), end(true);
    CHECK(start.timing_enabled());
    start.record(current_stream(kCPU));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    end.record(current_stream(kCPU));
    double ms = start.elapsed_time(end);
    CHECK(ms >= 20.0);
    CHECK(ms < 10000.0);
    CHECK(end.elapsed_time(start) <= -20.0);             // signed, as CUDA's
}

TEST_CASE("Event errors are typed and name what is missing") {
    Event untimed, timed(true), unrecorded(true);
    untimed.record(current_stream(kCPU));
    timed.record(current_stream(kCPU));
    CHECK_THROWS_WITH_AS(untimed.elapsed_time(timed), doctest::Contains("enable_timing"), ValueError);
    CHECK_THROWS_WITH_AS(timed.elapsed_time(unrecorded), doctest::Contains("must be recorded"), ValueError);
    Stream cuda_stream(Device(kCUDA, 0), 0);
    CHECK_THROWS_WITH_AS(timed.record(cuda_stream), doctest::Contains("cuda"), DeviceError);
    CHECK_THROWS_WITH_AS(timed.wait(cuda_stream), doctest::Contains("recorded on cpu"), DeviceError);
}

TEST_CASE("Event is move-only and a moved-from event is unrecorded") {
    Event a(true);
    a.record(current_stream(kCPU));
    Event b(std::move(a));
    CHECK(b.is_recorded());
    CHECK_FALSE(a.is_recorded());                        // NOLINT(bugprone-use-after-move): defined state
    Event c;
    c = std::move(b);
    CHECK(c.is_recorded());
    CHECK(c.timing_enabled());
}

TEST_CASE("without a usable GPU, CUDA streams fail with a DeviceError naming the device") {
    if (cuda::is_available()) return;                    // tests/cuda covers a present GPU
    CHECK_THROWS_WITH_AS(current_stream(Device(kCUDA, 0)), doctest::Contains("cuda"), DeviceError);
    CHECK_THROWS_AS(default_stream(Device("cuda:1")), DeviceError);
    CHECK_THROWS_AS(new_stream(kCUDA), DeviceError);
    CHECK_THROWS_AS(synchronize(kCUDA), DeviceError);
    CHECK_THROWS_AS(StreamGuard(Stream(Device(kCUDA, 0), 0)), DeviceError);
    CHECK(current_stream(kCPU).is_default());            // a failed guard changed nothing
    Event e;
    CHECK_THROWS_AS(e.record(Stream(Device(kCUDA, 0), 0)), DeviceError);
    CHECK_FALSE(e.is_recorded());
}

TEST_CASE("the CPU registers a stream runtime; a CPU index other than 0 does not exist") {
    StreamRuntime& cpu_runtime = stream_runtime(kCPU);
    CHECK_NOTHROW(cpu_runtime.check_device(0));
    CHECK_THROWS_AS(cpu_runtime.check_device(1), DeviceError);
}
