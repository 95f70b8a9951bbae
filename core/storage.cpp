// storage.cpp: a Storage asks its device's allocator for memory on the current stream and gives it
// back on destruction.
#include "core/storage.hpp"

#include "core/error.hpp"

namespace ampgrad {

StorageImpl::StorageImpl(size_t nbytes, Device device)
    : nbytes_(nbytes), device_(device), allocator_(&allocator_for(device)) {   // allocator first: it says why a device is unusable
    data_ = allocator_->allocate(nbytes, current_stream(device));
}

StorageImpl::StorageImpl(size_t nbytes, Allocator& pinned_host_allocator)
    : nbytes_(nbytes), device_(Device(kCPU)), allocator_(&pinned_host_allocator), pinned_(true) {
    data_ = allocator_->allocate(nbytes, current_stream(device_));
}

StorageImpl::~StorageImpl() { allocator_->deallocate(data_, nbytes_); }

void StorageImpl::record_stream(const Stream& stream) {
    if (!(stream.device() == device_) && !pinned_)         // pinned host memory is used on device streams
        throw DeviceError(fmt::format("record_stream: the storage is on {} but {} is on {}", device_.str(),
                                      stream.str(), stream.device().str()));
    if (data_ != nullptr) allocator_->record_stream(data_, stream);
}

}  // namespace ampgrad
