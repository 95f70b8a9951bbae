// dist/gloo_collectives.cpp: ampgrad's collectives on Gloo's algorithms (gloo/allreduce.h, ...).
// Gloo has no bf16, and no fp16 on this build's CPU path: f16/bf16 are reduced in an fp32 copy and
// rounded back once. Gloo has no true reduce-scatter for a contiguous buffer: it is an all-reduce
// of a copy of the input, then each rank keeps its chunk (twice the traffic of a ring
// reduce-scatter; NCCL does it natively). all_gather and broadcast move bytes, so any dtype works.
#include "ampgrad_config.h"
#if AMPGRAD_WITH_GLOO
#include "dist/gloo_group.hpp"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/context.h>
#include <gloo/math.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <cstring>

namespace ampgrad::dist::gloo_impl {

namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
void all_reduce_typed(const Comm& c, T* data, size_t n, ReduceOp op, uint32_t tag) {
    gloo::AllreduceOptions opts(c.ctx);
    opts.setOutput(data, n);   // no input set: Gloo reduces the output buffer in place
    opts.setReduceFunction(op == ReduceOp::kMax ? static_cast<ReduceFn>(&gloo::max<T>)
                                                : static_cast<ReduceFn>(&gloo::sum<T>));
    opts.setTag(tag);
    opts.setTimeout(c.timeout);
    gloo::allreduce(opts);
    if (op == ReduceOp::kAvg)
        for (size_t i = 0; i < n; ++i) data[i] = static_cast<T>(data[i] / static_cast<T>(c.world_size));
}

// f16 / bf16: widen to fp32, reduce, round back once.
void all_reduce_half(const Comm& c, Tensor& t, ReduceOp op, uint32_t tag) {
    const size_t n = static_cast<size_t>(t.numel());
    auto* bits = static_cast<uint16_t*>(t.raw_data());
    const bool bf16 = t.dtype() == kBFloat16;
    std::vector<float> wide(n);
    for (size_t i = 0; i < n; ++i) wide[i] = bf16 ? bf16_bits_to_float(bits[i]) : half_bits_to_float(bits[i]);
    all_reduce_typed(c, wide.data(), n, op, tag);
    for (size_t i = 0; i < n; ++i) bits[i] = bf16 ? float_to_bf16_bits(wide[i]) : float_to_half_bits(wide[i]);
}

}  // namespace

void all_reduce(const Comm& c, Tensor& t, ReduceOp op, uint32_t tag) {
    const size_t n = static_cast<size_t>(t.numel());
    if (n == 0) return;
    switch (t.dtype()) {
    case DType::kFloat32: all_reduce_typed(c, static_cast<float*>(t.raw_data()), n, op, tag); break;
    case DType::kFloat64: all_reduce_typed(c, static_cast<double*>(t.raw_data()), n, op, tag); break;
    case DType::kInt64: all_reduce_typed(c, static_cast<int64_t*>(t.raw_data()), n, op, tag); break;
    case DType::kInt32: all_reduce_typed(c, static_cast<int32_t*>(t.raw_data()), n, op, tag); break;
    case DType::kFloat16:
    case DType::kBFloat16: all_reduce_half(c, t, op, tag); break;
    case DType::kBool: all_reduce_typed(c, static_cast<uint8_t*>(t.raw_data()), n, ReduceOp::kMax, tag); break;
    case DType::kUInt8: all_reduce_typed(c, static_cast<uint8_t*>(t.raw_data()), n, op, tag); break;
    case DType::kFloat8_e4m3fn:
    case DType::kFloat8_e5m2:
        throw DTypeError(fmt::format("all_reduce: {} is not reducible (fp8 is a storage dtype: reduce in f32 and cast)",
                                     t.describe()));
    }
}

void reduce_scatter(const Comm& c, Tensor& output, const Tensor& input, ReduceOp op, uint32_t tag) {
    Tensor full = input.detach().clone();
    all_reduce(c, full, op, tag);
    const size_t bytes = static_cast<size_t>(output.numel()) * output.element_size();
    std::memcpy(output.raw_data(), static_cast<const char*>(full.raw_data()) + bytes * c.rank, bytes);
}

void all_gather(const Comm& c, Tensor& output, const Tensor& input, uint32_t tag) {
    const size_t bytes = static_cast<size_t>(input.numel()) * input.element_size();
    if (bytes == 0) return;
    gloo::AllgatherOptions opts(c.ctx);
    opts.setInput(static_cast<uint8_t*>(input.raw_data()), bytes);
    opts.setOutput(static_cast<uint8_t*>(output.raw_data()), bytes * c.world_size);
    opts.setTag(tag);
    opts.setTimeout(c.timeout);
    gloo::allgather(opts);
}

void broadcast(const Comm& c, Tensor& t, int src, uint32_t tag) {
    const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
    if (bytes == 0) return;
    gloo::BroadcastOptions opts(c.ctx);
    opts.setOutput(static_cast<uint8_t*>(t.raw_data()), bytes);
    opts.setRoot(src);
    opts.setTag(tag);
    opts.setTimeout(c.timeout);
    gloo::broadcast(opts);
}

void barrier(const Comm& c, uint32_t tag) {
    gloo::BarrierOptions opts(c.ctx);
    opts.setTag(tag);
    opts.setTimeout(c.timeout);
    gloo::barrier(opts);
}

// Gloo's unbound buffers: the receive is posted before the send, so two ranks that exchange with
// each other never wait on one another; the slot is built from the group's tag, as Gloo's own
// collectives build theirs, under a prefix none of them uses.
constexpr uint8_t kSendRecvSlotPrefix = 0x20;

void send_recv(const Comm& c, const Tensor& send, int dst, Tensor& recv, int src, uint32_t tag) {
    const uint64_t slot = gloo::Slot::build(kSendRecvSlotPrefix, tag);
    const size_t send_bytes = static_cast<size_t>(send.numel()) * send.element_size();
    const size_t recv_bytes = static_cast<size_t>(recv.numel()) * recv.element_size();
    if (dst == c.rank) {   // with itself (check_send_recv_peers): a copy
        std::memcpy(recv.raw_data(), send.raw_data(), send_bytes);
        return;
    }
    auto inbox = c.ctx->createUnboundBuffer(recv.raw_data(), recv_bytes);
    auto outbox = c.ctx->createUnboundBuffer(send.raw_data(), send_bytes);
    if (recv_bytes > 0) inbox->recv(src, slot);
    if (send_bytes > 0) outbox->send(dst, slot);
    if (recv_bytes > 0 && !inbox->waitRecv(c.timeout))
        throw std::runtime_error(fmt::format("Timed out waiting {} ms for recv operation to complete from rank {}",
                                             c.timeout.count(), src));
    if (send_bytes > 0 && !outbox->waitSend(c.timeout))
        throw std::runtime_error(fmt::format("Timed out waiting {} ms for send operation to complete to rank {}",
                                             c.timeout.count(), dst));
}

}  // namespace ampgrad::dist::gloo_impl
#endif  // AMPGRAD_WITH_GLOO
