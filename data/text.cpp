// text.cpp: reading and checking a user's text file (data/text.hpp).
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#include "core/error.hpp"
#include "data/text.hpp"

namespace ampgrad::data {

size_t first_invalid_utf8(std::string_view text) {
    const auto* s = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    for (size_t i = 0; i < n;) {
        const unsigned char c = s[i];
        size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
        if (c == 0 || len == 0 || i + len > n) return i;
        for (size_t j = 1; j < len; ++j)
            if ((s[i + j] & 0xC0) != 0x80) return i;
        if (len == 2 && c < 0xC2) return i;   // overlong encoding of an ASCII character
        i += len;
    }
    return std::string_view::npos;
}

std::string read_text_file(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        throw IOError(fmt::format("data file {}: cannot open it: {}", path, std::strerror(errno)));
    if (!S_ISREG(st.st_mode)) throw IOError(fmt::format("data file {}: not a regular file", path));
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IOError(fmt::format("data file {}: cannot read it: {}", path, std::strerror(errno)));
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (in.bad()) throw IOError(fmt::format("data file {}: reading failed: {}", path, std::strerror(errno)));
    std::string text = buffer.str();
    if (text.empty()) throw IOError(fmt::format("data file {}: the file is empty", path));
    if (size_t bad = first_invalid_utf8(text); bad != std::string_view::npos)
        throw IOError(fmt::format("data file {}: not a text file: the byte 0x{:02x} at offset {} is {}", path,
                                  static_cast<unsigned char>(text[bad]), bad,
                                  text[bad] == 0 ? "a NUL byte" : "not valid UTF-8"));
    return text;
}

}  // namespace ampgrad::data
