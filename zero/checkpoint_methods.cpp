// checkpoint_methods.cpp: ZeroEngine::save_checkpoint / load_checkpoint, DeepSpeed's method spellings
// (deepspeed/runtime/engine.py) over the free functions of zero/checkpoint.hpp.
#include <fmt/format.h>

#include "zero/checkpoint.hpp"

#include <filesystem>

namespace ampgrad::zero {

std::string ZeroEngine::save_checkpoint(const std::string& save_dir, const std::string& tag) {
    const std::string chosen = tag.empty() ? fmt::format("global_step{}", global_steps()) : tag;
    return zero::save_checkpoint(*this, save_dir, chosen);
}

LoadResult ZeroEngine::load_checkpoint(const std::string& load_dir, const std::string& tag) {
    return zero::load_checkpoint(*this, tag.empty() ? load_dir : (std::filesystem::path(load_dir) / tag).string());
}

}  // namespace ampgrad::zero
