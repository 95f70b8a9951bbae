// storage.cpp: a Storage asks its device's allocator for memory and gives it back on destruction.
#include "core/storage.hpp"

namespace ampgrad {

StorageImpl::StorageImpl(size_t nbytes, Device device)
    : nbytes_(nbytes), device_(device), allocator_(&allocator_for(device)) {
    data_ = allocator_->allocate(nbytes);
}

StorageImpl::~StorageImpl() { allocator_->deallocate(data_, nbytes_); }

}  // namespace ampgrad
