// storage.hpp: a reference-counted block of device memory. Views share one Storage; a Tensor
// adds sizes/strides/offset on top. Storage knows nothing of dtype or autograd.
// The block is allocated on the device's current stream when the Storage is made (core/allocator.hpp).
#pragma once
#include <memory>

#include "core/allocator.hpp"

namespace ampgrad {

class StorageImpl {
public:
    StorageImpl(size_t nbytes, Device device);
    ~StorageImpl();
    StorageImpl(const StorageImpl&) = delete;
    StorageImpl& operator=(const StorageImpl&) = delete;

    void* data() const { return data_; }
    size_t nbytes() const { return nbytes_; }
    Device device() const { return device_; }
    // The block is also used on `stream`: the allocator keeps it until that stream's work so far is done.
    void record_stream(const Stream& stream);

private:
    void* data_ = nullptr;
    size_t nbytes_ = 0;
    Device device_;
    Allocator* allocator_ = nullptr;
};

using Storage = std::shared_ptr<StorageImpl>;

}  // namespace ampgrad
