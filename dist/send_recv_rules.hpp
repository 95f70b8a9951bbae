// dist/send_recv_rules.hpp: what ProcessGroup::send_recv accepts, checked the same way by every
// backend (dist/gloo_group.cpp, dist/nccl_group.cpp).
#pragma once
#include "core/tensor.hpp"

namespace ampgrad::dist {

// dst and src in [0, world_size); a rank exchanging with itself (dst == src == rank, e.g. a ring of
// one) names itself as both peers, with the same dtype and size (the backend then copies).
// ValueError naming the facts.
void check_send_recv_peers(int dst, int src, int rank, int world_size, const Tensor& send, const Tensor& recv);

}  // namespace ampgrad::dist
