// sha256.hpp: SHA-256 digests (OpenSSL's libcrypto, EVP API) as lowercase hex, for recording which
// tokenizer files and inputs a set of token shards was made from (data/prepare.hpp's meta.json).
//
//   data::sha256_hex(data::gpt2_tiktoken_ranks())   // "306cd27f..."
//   data::Sha256 h;  h.update(part1);  h.update(part2);  std::string hex = h.hex_digest();
#pragma once
#include <string>
#include <string_view>

namespace ampgrad::data {

class Sha256 {
public:
    Sha256();
    ~Sha256();
    Sha256(const Sha256&) = delete;
    Sha256& operator=(const Sha256&) = delete;
    void update(std::string_view bytes);
    std::string hex_digest();   // 64 hex digits; the hash cannot be updated after this

private:
    void* ctx_;   // EVP_MD_CTX
};

std::string sha256_hex(std::string_view bytes);
// The digest of a file's bytes, read in pieces (IOError naming the file when unreadable).
std::string sha256_file(const std::string& path);

}  // namespace ampgrad::data
