// philox.hpp: Philox 4x32-10, the counter-based generator used by cuRAND and PyTorch. A (key,
// counter) pair maps to four 32-bit numbers with no state, so element i of a random tensor can
// be computed independently on any thread or device and the result never depends on either.
#pragma once
#include <array>
#include <cstdint>

// Under nvcc the generator is also compiled for the GPU (cuda/random.cu draws the same numbers).
#ifdef __CUDACC__
#define AMPGRAD_HOST_DEVICE __host__ __device__
#else
#define AMPGRAD_HOST_DEVICE
#endif

namespace ampgrad {

struct Philox4x32 {
    AMPGRAD_HOST_DEVICE static std::array<uint32_t, 4> generate(uint64_t key, uint64_t counter_hi,
                                                                uint64_t counter_lo) {
        uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
        std::array<uint32_t, 4> c = {static_cast<uint32_t>(counter_lo), static_cast<uint32_t>(counter_lo >> 32),
                                     static_cast<uint32_t>(counter_hi), static_cast<uint32_t>(counter_hi >> 32)};
        for (int round = 0; round < 10; ++round) {
            uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c[0];
            uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c[2];
            c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0, static_cast<uint32_t>(p1),
                 static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1, static_cast<uint32_t>(p0)};
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        return c;
    }
    // uniform in [0, 1) with 24 bits of resolution
    AMPGRAD_HOST_DEVICE static float to_unit_float(uint32_t x) {
        return static_cast<float>(x >> 8) * (1.0f / 16777216.0f);
    }
    // uniform in [0, 1) with 53 bits (two draws)
    AMPGRAD_HOST_DEVICE static double to_unit_double(uint32_t hi, uint32_t lo) {
        uint64_t v = (static_cast<uint64_t>(hi) << 21) ^ (lo >> 11);
        return static_cast<double>(v & ((1ULL << 53) - 1)) * (1.0 / 9007199254740992.0);
    }
};

// The default generator: a seed and an offset. Every random op reserves the counters it draws by
// advancing the offset, so a seed reproduces the same sequence of tensors on every device.
struct GeneratorState {
    uint64_t seed = 67280421310721ULL;
    uint64_t offset = 0;
};
GeneratorState& default_generator();                  // thread-safe reservation via reserve()
uint64_t generator_reserve(uint64_t count);            // returns the offset to use; advances it
// The offset for a kernels::random_uniform / random_normal fill of `numel` elements: elements
// (2p, 2p+1) take Philox block offset/4 + p, 4 counters a pair, so 2 counters an element.
inline uint64_t generator_reserve_elements(int64_t numel) { return generator_reserve(static_cast<uint64_t>(numel) * 2); }
GeneratorState get_rng_state();
void set_rng_state(const GeneratorState& s);

}  // namespace ampgrad
