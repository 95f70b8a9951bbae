// dist/store_protocol.hpp: the wire format shared by the TCP store's client (store.cpp) and its
// server (store_server.cpp). A frame is a u32 length (host order: both ends are ampgrad on the same
// architecture) then the payload. A request payload is a u8 opcode then fields; a string field is a
// u32 length and its bytes. A reply payload is the value (get), the new counter as text (add),
// a single byte (check) or nothing (set, wait, watch).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace ampgrad::dist::wire {

// kWatch: the server sets the given key when this connection closes (a dead rank shows up there).
enum class Op : uint8_t { kSet = 1, kGet = 2, kWait = 3, kAdd = 4, kCheck = 5, kWatch = 6 };

inline void put_u32(std::vector<char>& out, uint32_t v) {
    char b[4];
    std::memcpy(b, &v, 4);
    for (char c : b) out.push_back(c);
}

// A request payload, opened with its opcode.
inline std::vector<char> request(Op op) {
    std::vector<char> out;
    out.reserve(64);
    out.push_back(static_cast<char>(op));
    return out;
}
inline void put_bytes(std::vector<char>& out, const char* data, size_t n) {
    put_u32(out, static_cast<uint32_t>(n));
    out.insert(out.end(), data, data + n);
}
inline void put_string(std::vector<char>& out, const std::string& s) { put_bytes(out, s.data(), s.size()); }

// Reads fields from a payload; `ok` turns false on a truncated payload.
struct Reader {
    const char* p;
    const char* end;
    bool ok = true;
    uint32_t u32() {
        if (end - p < 4) { ok = false; return 0; }
        uint32_t v; std::memcpy(&v, p, 4); p += 4; return v;
    }
    std::string str() {
        uint32_t n = u32();
        if (!ok || static_cast<size_t>(end - p) < n) { ok = false; return {}; }
        std::string s(p, n); p += n; return s;
    }
};

// A frame around a payload.
inline std::vector<char> frame(const std::vector<char>& payload) {
    std::vector<char> out;
    out.reserve(payload.size() + 4);
    put_u32(out, static_cast<uint32_t>(payload.size()));
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
}

}  // namespace ampgrad::dist::wire
