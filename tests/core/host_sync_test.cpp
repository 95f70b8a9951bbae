// host_sync_test.cpp: HostSyncCounter sees every host wait core makes (stream, device and event
// synchronisation, host reads of tensor values), nests, and stops counting when it dies.
#include <doctest/doctest.h>

#include "core/host_sync.hpp"
#include "core/stream.hpp"
#include "tests/support/fixtures.hpp"

using namespace ampgrad;

TEST_CASE("HostSyncCounter: counts synchronisations and host reads, by kind") {
    Tensor t = full({2}, 3.0);
    HostSyncCounter syncs;
    CHECK(syncs.count() == 0);
    current_stream(Device(kCPU)).synchronize();
    synchronize(Device(kCPU));
    Event done;
    done.record(current_stream(Device(kCPU)));
    done.synchronize();
    CHECK(t.sum().item<float>() == 6.0f);
    CHECK(t.to_vector<float>().size() == 2);
    CHECK(syncs.count() == 5);
    CHECK(syncs.count(HostSync::kStreamSynchronize) == 1);
    CHECK(syncs.count(HostSync::kDeviceSynchronize) == 1);
    CHECK(syncs.count(HostSync::kEventSynchronize) == 1);
    CHECK(syncs.count(HostSync::kHostRead) == 2);
    CHECK(syncs.describe().rfind("5 host syncs: stream synchronize on cpu", 0) == 0);
    syncs.reset();
    CHECK(syncs.count() == 0);
}

TEST_CASE("HostSyncCounter: arithmetic on the device side is not a sync; counters nest and end") {
    Tensor a = full({3}, 2.0), b = full({3}, 5.0);
    HostSyncCounter outer;
    {
        HostSyncCounter inner;
        Tensor c = (a * b).sum();                         // queued work only
        CHECK(inner.count() == 0);
        (void)c.item<double>();
        CHECK(inner.count() == 1);
    }
    (void)a.sum().item<double>();                         // after inner died: only outer sees it
    CHECK(outer.count() == 2);
    CHECK(outer.entries()[1].kind == HostSync::kHostRead);
    CHECK(outer.entries()[1].device == Device(kCPU));
}
