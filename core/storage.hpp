// storage.hpp: a reference-counted block of device memory. Views share one Storage; a Tensor
// adds sizes/strides/offset on top. Storage knows nothing of dtype or autograd.
// The block is allocated on the device's current stream when the Storage is made (core/allocator.hpp).
// Pinned storage is CPU memory from an accelerator's page-locked allocator: copies between it and the
// device run asynchronously, and it may be recorded on the accelerator's streams (record_stream).
#pragma once
#include <memory>

#include "core/allocator.hpp"

namespace ampgrad {

class StorageImpl {
public:
    StorageImpl(size_t nbytes, Device device);
    // Host memory from an accelerator's page-locked allocator (Tensor::pin_memory()).
    StorageImpl(size_t nbytes, Allocator& pinned_host_allocator);
    ~StorageImpl();
    StorageImpl(const StorageImpl&) = delete;
    StorageImpl& operator=(const StorageImpl&) = delete;

    void* data() const { return data_; }
    size_t nbytes() const { return nbytes_; }
    Device device() const { return device_; }
    bool is_pinned() const { return pinned_; }         // page-locked host memory
    // The block is also used on `stream`: the allocator keeps it until that stream's work so far is done.
    void record_stream(const Stream& stream);

private:
    void* data_ = nullptr;
    size_t nbytes_ = 0;
    Device device_;
    Allocator* allocator_ = nullptr;
    bool pinned_ = false;
};

using Storage = std::shared_ptr<StorageImpl>;

}  // namespace ampgrad
