// crc32c.hpp: CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord and
// tfevents files, and the masking TFRecord applies to a stored CRC. A table-driven implementation
// (Debian ships no maintained C/C++ CRC32C library); tests/io/tensorboard_test.cpp checks it against
// the published vectors (RFC 3720, appendix B.4).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ampgrad::tensorboard {

// The CRC-32C of `n` bytes, continuing from `crc` (0 for a fresh checksum).
uint32_t crc32c_extend(uint32_t crc, const void* data, std::size_t n);
inline uint32_t crc32c(std::string_view bytes) { return crc32c_extend(0, bytes.data(), bytes.size()); }

// TFRecord stores a CRC rotated right by 15 bits plus a constant, so that a CRC of data that holds
// CRCs stays well distributed.
inline uint32_t crc32c_masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace ampgrad::tensorboard
