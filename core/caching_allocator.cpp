// caching_allocator.cpp: the pool logic of core/caching_allocator.hpp (see there for the rules).
// A segment is one raw allocation; its blocks form a doubly linked list in address order (prev/next),
// so a freed block finds its neighbours without a search. Free blocks sit in the small or large pool,
// ordered by (stream, size, address): the best fit on a stream is one lower_bound away.
#include "core/caching_allocator.hpp"

#include <fmt/format.h>

#include <tuple>

#include "core/error.hpp"

namespace ampgrad {

struct CachingAllocator::Block {
    char* ptr = nullptr;
    size_t size = 0;
    uint64_t stream = 0;                 // allocated for, and cached for, this stream
    bool allocated = false;
    int pending_events = 0;              // events still to complete before it returns to the pool
    bool small_pool = false;             // cut from a small-pool segment
    std::vector<Stream> used_on;         // record_stream: other streams using it
    size_t requested = 0;                // the bytes asked for (statistics count these)
    Block* prev = nullptr;               // neighbours in the same segment
    Block* next = nullptr;
};

bool CachingAllocator::ByStreamSizeAddress::operator()(const Block* a, const Block* b) const {
    return std::tie(a->stream, a->size, a->ptr) < std::tie(b->stream, b->size, b->ptr);
}

namespace {

void raise_peaks(AllocatorStats& s) {
    s.peak_allocated_bytes = std::max(s.peak_allocated_bytes, s.allocated_bytes);
    s.peak_reserved_bytes = std::max(s.peak_reserved_bytes, s.reserved_bytes);
}

size_t round_up(size_t n, size_t multiple) { return (n + multiple - 1) / multiple * multiple; }

}  // namespace

CachingAllocator::CachingAllocator(DeviceMemory& memory, CachingAllocatorConfig config)
    : memory_(memory), config_(config) {}

CachingAllocator::~CachingAllocator() {
    // Allocators live as long as the process (tensors may outlive statics); this runs only for
    // allocators a test made. Live blocks would dangle, so only unused segments go back.
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [event, block] : pending_) memory_.destroy_event(event);
    for (Block* first : segments_) {
        bool unused = true;
        for (Block* b = first; b; b = b->next) unused = unused && !b->allocated;
        if (unused) memory_.raw_free(first->ptr);
        for (Block* b = first; b;) {
            Block* next = b->next;
            delete b;
            b = next;
        }
    }
}

CachingAllocator::Pool& CachingAllocator::pool_of(const Block* block) { return block->small_pool ? small_ : large_; }

size_t CachingAllocator::rounded(size_t nbytes) const {
    return round_up(std::max<size_t>(nbytes, 1), config_.round_bytes);
}

size_t CachingAllocator::segment_size(size_t size) const {
    if (size <= config_.small_request) return config_.small_segment;
    if (size < config_.mid_request) return config_.large_segment;
    return round_up(size, config_.large_round);
}

// The smallest cached block of the stream that holds `size`, taken out of its pool; null if none.
CachingAllocator::Block* CachingAllocator::find_cached(size_t size, uint64_t stream) {
    Pool& pool = pool_for_request(size);
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = pool.lower_bound(&key);
    if (it == pool.end() || (*it)->stream != stream) return nullptr;
    Block* block = *it;
    pool.erase(it);
    return block;
}

// A new segment of the pool's size for `size`; on out-of-memory, releases the cache and retries once.
CachingAllocator::Block* CachingAllocator::new_segment(size_t size, uint64_t stream, size_t requested) {
    const size_t bytes = segment_size(size);
    void* ptr = memory_.raw_allocate(bytes);
    if (ptr == nullptr) {
        release_cached_segments();
        ptr = memory_.raw_allocate(bytes);
    }
    if (ptr == nullptr) throw_out_of_memory(requested, bytes);
    auto* block = new Block{static_cast<char*>(ptr), bytes, stream};
    block->small_pool = size <= config_.small_request;
    segments_.push_back(block);
    stats_.reserved_bytes += static_cast<int64_t>(bytes);
    ++stats_.num_device_allocs;
    return block;
}

// Cuts `block` to `size` when the rest is worth keeping (any 512 bytes in the small pool; more than
// a small request in the large one, so large blocks are not shredded); the rest goes to the pool.
CachingAllocator::Block* CachingAllocator::split(Block* block, size_t size) {
    const size_t rest = block->size - size;
    const bool worth = block->small_pool ? rest >= config_.round_bytes : rest > config_.small_request;
    if (!worth) return block;
    auto* tail = new Block{block->ptr + size, rest, block->stream};
    tail->prev = block;
    tail->next = block->next;
    if (block->next) block->next->prev = tail;
    block->next = tail;
    block->size = size;
    tail->small_pool = block->small_pool;
    pool_of(tail).insert(tail);
    return block;
}

void* CachingAllocator::allocate(size_t nbytes, const Stream& stream) {
    require_own_stream("allocate", stream);
    if (nbytes == 0) return nullptr;                       // empty tensors own no memory
    std::lock_guard<std::mutex> lock(mutex_);
    process_events();
    const size_t size = rounded(nbytes);
    Block* block = find_cached(size, stream.id());
    if (block == nullptr) block = new_segment(size, stream.id(), nbytes);
    block = split(block, size);
    block->allocated = true;
    block->requested = nbytes;
    live_[block->ptr] = block;
    stats_.allocated_bytes += static_cast<int64_t>(nbytes);
    ++stats_.num_allocs;
    raise_peaks(stats_);
    return block->ptr;
}

void CachingAllocator::deallocate(void* ptr, size_t) noexcept {
    if (ptr == nullptr) return;
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end()) return;                         // not ours: nothing sane to do in a destructor
    Block* block = it->second;
    live_.erase(it);
    block->allocated = false;
    stats_.allocated_bytes -= static_cast<int64_t>(block->requested);
    ++stats_.num_frees;
    for (const Stream& other : block->used_on) {                // reusable once those streams are past it
        try {
            pending_.emplace_back(memory_.record_event(other), block);
            ++block->pending_events;
        } catch (...) {                                    // no event (runtime shutting down): keep it out
            ++block->pending_events;                       // of the pool for good rather than risk reuse
        }
    }
    block->used_on.clear();
    if (block->pending_events == 0) return_to_pool(block);
}

// Marks a free block reusable: merges it with free neighbours of its segment, then pools it.
void CachingAllocator::return_to_pool(Block* block) {
    auto free_neighbour = [](Block* b) { return b && !b->allocated && b->pending_events == 0; };
    if (free_neighbour(block->prev)) {
        Block* prev = block->prev;
        pool_of(prev).erase(prev);
        prev->size += block->size;
        prev->next = block->next;
        if (block->next) block->next->prev = prev;
        delete block;
        block = prev;
    }
    if (free_neighbour(block->next)) {
        Block* next = block->next;
        pool_of(next).erase(next);
        block->size += next->size;
        block->next = next->next;
        if (next->next) next->next->prev = block;
        delete next;
    }
    pool_of(block).insert(block);
}

// Pools the blocks whose other-stream events have completed (oldest first, as PyTorch does).
void CachingAllocator::process_events() {
    while (!pending_.empty() && memory_.event_completed(pending_.front().first)) {
        auto [event, block] = pending_.front();
        pending_.pop_front();
        memory_.destroy_event(event);
        if (--block->pending_events == 0) return_to_pool(block);
    }
}

// Waits for every pending event, then frees each segment that is one whole free block.
void CachingAllocator::release_cached_segments() {
    for (auto& [event, block] : pending_) memory_.wait_event(event);
    process_events();
    std::vector<Block*> kept;
    for (Block* first : segments_) {
        if (first->next == nullptr && !first->allocated && first->pending_events == 0) {
            pool_of(first).erase(first);
            memory_.raw_free(first->ptr);
            stats_.reserved_bytes -= static_cast<int64_t>(first->size);
            ++stats_.num_device_frees;
            delete first;
        } else {
            kept.push_back(first);
        }
    }
    segments_ = std::move(kept);
}

void CachingAllocator::record_stream(void* ptr, const Stream& stream) {
    if (!memory_.usable_on(stream))
        throw DeviceError(fmt::format("{} allocator record_stream: {} is on {}, which cannot use this memory",
                                      device().str(), stream.str(), stream.device().str()));
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = live_.find(ptr);
    if (it == live_.end())
        throw ValueError(fmt::format("{} allocator record_stream: {} is not a live block of this allocator",
                                     device().str(), ptr));
    Block* block = it->second;
    if (stream.device() == device() && stream.id() == block->stream) return;   // its own stream orders the reuse
    for (const Stream& used : block->used_on)
        if (used == stream) return;
    block->used_on.push_back(stream);
}

AllocatorStats CachingAllocator::stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
}

void CachingAllocator::reset_peak_stats() {
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.peak_allocated_bytes = stats_.allocated_bytes;
    stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

void CachingAllocator::empty_cache() {
    std::lock_guard<std::mutex> lock(mutex_);
    release_cached_segments();
}

int64_t CachingAllocator::cached_blocks() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(small_.size() + large_.size());
}

int64_t CachingAllocator::segments() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(segments_.size());
}

void CachingAllocator::require_own_stream(const char* call, const Stream& stream) const {
    if (!(stream.device() == device()))
        throw DeviceError(fmt::format("{} allocator {}: {} is on {}, not {}", device().str(), call, stream.str(),
                                      stream.device().str(), device().str()));
}

void CachingAllocator::throw_out_of_memory(size_t requested, size_t segment) {
    throw OutOfMemoryError(fmt::format(
        "{}: out of memory: tried to allocate {} bytes (a {}-byte segment); {} bytes allocated by tensors, {} "
        "reserved by the caching allocator, {} free on the device after releasing the cache; free tensors or "
        "use a smaller batch", device().str(), requested, segment, stats_.allocated_bytes, stats_.reserved_bytes,
        memory_.free_device_bytes()));
}

}  // namespace ampgrad
