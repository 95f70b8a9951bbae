// config_limits.hpp: the largest model a config may describe. Every family's config checks its
// parameter count (computed in double) against it in validate(), so that a corrupt or mistyped
// size (a config.json or state.json with "n_layer": 4611686018427387904) is a ValueError at once,
// not an int64 overflow in num_parameters() or a model build that never ends.
#pragma once
#include <fmt/format.h>

#include "core/error.hpp"

namespace ampgrad::models {

// 2^48 (2.8e14) parameters: a petabyte in f32, a thousand times the largest published models.
inline constexpr double kMaxModelParameters = 281474976710656.0;

inline void check_model_size(const char* config, double parameters) {
    if (!(parameters <= kMaxModelParameters))
        throw ValueError(fmt::format("{}: the sizes describe a model of {:.3g} parameters, more than ampgrad's limit "
                                     "of {:.3g} (a corrupt or mistyped size?)", config, parameters, kMaxModelParameters));
}

}  // namespace ampgrad::models
