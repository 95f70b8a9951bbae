// tensorboard_flags.hpp: the TensorBoard flags of `ampgrad train` (app/tensorboard_log.hpp logs them),
// apart so that app/commands.hpp names them without including the trainer.
#pragma once
#include <cstdint>
#include <string>

namespace ampgrad::app {

struct TensorboardFlags {
    std::string dir;               // --tensorboard DIR (empty: no TensorBoard files)
    int64_t hist_every = 100;      // --tensorboard-hist-every N (0: no histograms)
};

}  // namespace ampgrad::app
