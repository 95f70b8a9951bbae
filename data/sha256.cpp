// sha256.cpp: SHA-256 through libcrypto's EVP digest API (data/sha256.hpp).
#include "data/sha256.hpp"

#include <openssl/evp.h>

#include <fstream>
#include <vector>

#include "core/error.hpp"

namespace ampgrad::data {

namespace {

EVP_MD_CTX* as_ctx(void* p) { return static_cast<EVP_MD_CTX*>(p); }

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
    if (ctx_ == nullptr || EVP_DigestInit_ex(as_ctx(ctx_), EVP_sha256(), nullptr) != 1)
        throw InternalError("sha256: libcrypto could not start a SHA-256 digest");
}

Sha256::~Sha256() { EVP_MD_CTX_free(as_ctx(ctx_)); }

void Sha256::update(std::string_view bytes) {
    if (EVP_DigestUpdate(as_ctx(ctx_), bytes.data(), bytes.size()) != 1)
        throw InternalError("sha256: libcrypto's EVP_DigestUpdate failed");
}

std::string Sha256::hex_digest() {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    if (EVP_DigestFinal_ex(as_ctx(ctx_), digest, &n) != 1)
        throw InternalError("sha256: libcrypto's EVP_DigestFinal_ex failed");
    static constexpr char kHex[] = "0123456789abcdef";
    std::string hex;
    for (unsigned int i = 0; i < n; ++i) {
        hex += kHex[digest[i] >> 4];
        hex += kHex[digest[i] & 0xF];
    }
    return hex;
}

std::string sha256_hex(std::string_view bytes) {
    Sha256 h;
    h.update(bytes);
    return h.hex_digest();
}

std::string sha256_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IOError(fmt::format("sha256: cannot open \"{}\"", path));
    Sha256 h;
    std::vector<char> buffer(size_t{1} << 20);
    while (in) {
        in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
        h.update(std::string_view(buffer.data(), static_cast<size_t>(in.gcount())));
    }
    if (in.bad()) throw IOError(fmt::format("sha256: cannot read \"{}\"", path));
    return h.hex_digest();
}

}  // namespace ampgrad::data
