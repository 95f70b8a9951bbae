// dist/gloo_group.hpp: pieces of the Gloo process group shared by gloo_group.cpp (the group, its
// worker thread and Work handles) and gloo_collectives.cpp (the collectives on Gloo's API).
#pragma once
#include "dist/process_group.hpp"

#include <map>
#include <memory>

namespace gloo { class Context; }

namespace ampgrad::dist::gloo_impl {

// What the collectives need: Gloo's context, the group's timeout and the world size.
struct Comm {
    std::shared_ptr<gloo::Context> ctx;
    Millis timeout;
    int rank;
    int world_size;
};

// The collectives, run on the group's worker thread; each takes the next tag (same order on every rank).
void all_reduce(const Comm& c, Tensor& t, ReduceOp op, uint32_t tag);
void reduce_scatter(const Comm& c, Tensor& output, const Tensor& input, ReduceOp op, uint32_t tag);
void all_gather(const Comm& c, Tensor& output, const Tensor& input, uint32_t tag);
void broadcast(const Comm& c, Tensor& t, int src, uint32_t tag);
void barrier(const Comm& c, uint32_t tag);
void send_recv(const Comm& c, const Tensor& send, int dst, Tensor& recv, int src, uint32_t tag);

}  // namespace ampgrad::dist::gloo_impl
