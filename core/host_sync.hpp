// host_sync.hpp: counting the points where the host waits for a device or reads a tensor's value.
//
// On a GPU every such point stalls the host until the device has drained its queue, so a training
// step that wants to keep the device busy must have none (docs/amp.md, "A step with no host
// synchronisation"). Core and each backend call note_host_sync() at every wait they make:
//   - Stream::synchronize, synchronize(device), Event::synchronize  (core/stream.cpp)
//   - a device-to-host copy, a copy to a device from pageable memory (cuda/copy.cu)
//   - Tensor::item() / to_vector(), on any device                   (core/tensor.cpp)
// A read of a CPU tensor costs nothing, but it is counted too: the code that reads a CPU value
// reads a device value on a GPU, so a CPU test can show that a code path makes no read at all.
//
//   HostSyncCounter syncs;                       // counts on every thread while it lives
//   scaler.step(opt); scaler.update();
//   CHECK(syncs.count() == 0);                   // syncs.describe() lists them if not
#pragma once
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/device.hpp"

namespace ampgrad {

enum class HostSync : uint8_t {
    kStreamSynchronize,
    kDeviceSynchronize,
    kEventSynchronize,
    kCopyToHost,
    kPageableCopyToDevice,    // a copy from pageable host memory: the driver waits for the stream first
    kHostRead,
};
const char* host_sync_name(HostSync kind);

// Called at each wait; cheap (one atomic load) when no counter is alive.
void note_host_sync(HostSync kind, Device device);

class HostSyncCounter {
public:
    struct Entry {
        HostSync kind;
        Device device;
    };
    HostSyncCounter();
    ~HostSyncCounter();
    HostSyncCounter(const HostSyncCounter&) = delete;
    HostSyncCounter& operator=(const HostSyncCounter&) = delete;

    int64_t count() const;                        // all waits since construction (or reset)
    int64_t count(HostSync kind) const;
    std::vector<Entry> entries() const;
    std::string describe() const;                 // "2 host syncs: host read on cuda:0, copy to host on cuda:0"
    void reset();

private:
    friend void note_host_sync(HostSync kind, Device device);
    void add(HostSync kind, Device device);
    mutable std::mutex mutex_;
    std::vector<Entry> entries_;
};

}  // namespace ampgrad
