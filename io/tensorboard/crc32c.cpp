// crc32c.cpp: a byte-at-a-time table CRC-32C (io/tensorboard/crc32c.hpp). tfevents files are small
// (a few KiB per logged step), so the simple table is fast enough.
#include "io/tensorboard/crc32c.hpp"

#include <array>

namespace ampgrad::tensorboard {

namespace {

constexpr uint32_t kCastagnoliReflected = 0x82F63B78u;

constexpr std::array<uint32_t, 256> make_table() {
    std::array<uint32_t, 256> table{};
    for (uint32_t byte = 0; byte < 256; ++byte) {
        uint32_t crc = byte;
        for (int bit = 0; bit < 8; ++bit) crc = (crc & 1u) ? (crc >> 1) ^ kCastagnoliReflected : crc >> 1;
        table[byte] = crc;
    }
    return table;
}

constexpr std::array<uint32_t, 256> kTable = make_table();

}  // namespace

uint32_t crc32c_extend(uint32_t crc, const void* data, std::size_t n) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    crc = ~crc;
    for (std::size_t i = 0; i < n; ++i) crc = kTable[(crc ^ bytes[i]) & 0xFFu] ^ (crc >> 8);
    return ~crc;
}

}  // namespace ampgrad::tensorboard
