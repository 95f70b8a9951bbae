// dist/error.hpp: the typed errors of ampgrad::dist (rendezvous, store and collectives).
// Every message names the operation, the group or key, and the timeout or the missing rank where known.
#pragma once
#include "core/error.hpp"

namespace ampgrad::dist {

struct DistError : Error { using Error::Error; };                    // a collective or rendezvous failed
struct DistTimeoutError : DistError { using DistError::DistError; };  // a wait ran past its timeout
struct StoreError : DistError { using DistError::DistError; };        // the TCP store: connect, I/O, timeout

}  // namespace ampgrad::dist
