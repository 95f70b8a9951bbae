// generator.cpp: the process-wide default Philox generator (seed + offset), with manual_seed.
#include <mutex>

#include "core/philox.hpp"

namespace ampgrad {

namespace {
std::mutex& generator_mutex() { static std::mutex m; return m; }
}  // namespace

GeneratorState& default_generator() {
    static GeneratorState state;
    return state;
}

uint64_t generator_reserve(uint64_t count) {
    std::lock_guard<std::mutex> lock(generator_mutex());
    uint64_t start = default_generator().offset;
    default_generator().offset += (count + 3) / 4 * 4;       // whole Philox blocks
    return start;
}

GeneratorState get_rng_state() {
    std::lock_guard<std::mutex> lock(generator_mutex());
    return default_generator();
}

void set_rng_state(const GeneratorState& s) {
    std::lock_guard<std::mutex> lock(generator_mutex());
    default_generator() = s;
}

void manual_seed(uint64_t seed) { set_rng_state(GeneratorState{seed, 0}); }

}  // namespace ampgrad
