// bpe_fixtures.hpp: shared helpers of the BPE tests: the fixture folder (tests/fixtures/bpe/, written
// by tools/make_bpe_fixtures.py), GPT-2's tokenizer loaded once, hex strings, temporary files.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "ampgrad/ampgrad.h"

namespace ampgrad::testing {

inline std::string bpe_fixture_path(const std::string& name) {
    const char* dir = std::getenv("AMPGRAD_FIXTURES");
    if (dir == nullptr) throw IOError("AMPGRAD_FIXTURES is not set (run the tests through meson test)");
    return std::string(dir) + "/bpe/" + name;
}

inline nlohmann::json load_bpe_fixture(const std::string& name) {
    std::ifstream in(bpe_fixture_path(name));
    if (!in) throw IOError("missing fixture " + bpe_fixture_path(name));
    return nlohmann::json::parse(in);
}

// GPT-2's tokenizer from the committed rank file, loaded once for all the cases.
inline const data::BpeTokenizer& gpt2_tokenizer() {
    static const data::BpeTokenizer tok = data::BpeTokenizer::from_tiktoken(bpe_fixture_path("gpt2.tiktoken"));
    return tok;
}

inline std::string from_hex(const std::string& hex) {
    std::string out;
    for (size_t i = 0; i + 1 < hex.size(); i += 2) out += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
    return out;
}

inline std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// A fresh directory under the system's temporary folder.
inline std::filesystem::path bpe_temp_dir(const std::string& tag) {
    static int counter = 0;
    auto dir = std::filesystem::temp_directory_path() / ("ampgrad_bpe_" + tag + "_" + std::to_string(::getpid()) + "_" +
                                                         std::to_string(counter++));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    return dir;
}

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace ampgrad::testing
