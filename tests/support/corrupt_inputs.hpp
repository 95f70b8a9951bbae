// corrupt_inputs.hpp: deterministic corruptions of a valid input file, for the tests that prove a
// reader answers every damaged file (a truncated save, a flipped byte, an edited config.json with
// a key of the wrong type or missing) with an ampgrad::Error naming the file: never another
// exception, a crash or a hang, and under CI's sanitizers never a bad read either.
//
//   for (const Corruption& c : json_corruptions(valid_json)) ...          // each value retyped, each key dropped
//   check_corruptions(byte_corruptions(valid_bytes), [&](const std::string& bytes) { write + read }, "model.safetensors");
//
// Header-only: only the few test files that corrupt inputs pay for compiling it.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace ampgrad::testing {

struct Corruption {
    std::string what;    // for the failure message: "json /run_config/lr = \"x\"", "truncated to 8 bytes"
    std::string bytes;   // the damaged file
};

namespace detail {

// Values of every JSON type, the extremes of the integers and a float where an integer belongs.
inline std::vector<nlohmann::json> foreign_values() {
    return {nullptr, -1, 0, int64_t{1} << 62, 1.5, 1e300, "x", nlohmann::json::array(), nlohmann::json::object(), true};
}

inline void collect_pointers(const nlohmann::json& j, const nlohmann::json::json_pointer& at,
                             std::vector<nlohmann::json::json_pointer>& out, size_t max_paths) {
    if (out.size() >= max_paths) return;
    if (!at.empty()) out.push_back(at);
    if (j.is_object()) {
        for (const auto& [key, value] : j.items()) collect_pointers(value, at / key, out, max_paths);
    } else if (j.is_array()) {
        for (size_t i = 0; i < std::min<size_t>(j.size(), 2); ++i) collect_pointers(j[i], at / i, out, max_paths);
    }
}

}  // namespace detail

// Each value of the document (depth first, the first two entries of each array, at most
// max_paths of them) replaced by each of foreign_values() in turn, and each object member deleted.
inline std::vector<Corruption> json_corruptions(const std::string& text, size_t max_paths = 120) {
    const nlohmann::json doc = nlohmann::json::parse(text);
    std::vector<nlohmann::json::json_pointer> paths;
    detail::collect_pointers(doc, nlohmann::json::json_pointer(), paths, max_paths);
    std::vector<Corruption> out;
    for (const auto& p : paths) {
        for (const nlohmann::json& v : detail::foreign_values()) {
            nlohmann::json changed = doc;
            changed[p] = v;
            out.push_back({fmt::format("json {} = {}", p.to_string(), v.dump()), changed.dump(1)});
        }
        if (doc[p.parent_pointer()].is_object()) {
            nlohmann::json changed = doc;
            changed[p.parent_pointer()].erase(p.back());
            out.push_back({fmt::format("json {} deleted", p.to_string()), changed.dump(1)});
        }
    }
    out.push_back({"json truncated to half", text.substr(0, text.size() / 2)});
    out.push_back({"json empty", ""});
    return out;
}

// Truncations at fixed points; `count` single bytes overwritten (0, 0xff, 0x7f, 0x80 or one bit
// flipped) at offsets drawn with a fixed seed; each 4-byte word of the first 64 bytes (a binary
// header's counts and sizes) set to 0 and to 0xffffffff; and junk appended.
inline std::vector<Corruption> byte_corruptions(const std::string& bytes, size_t count = 48, uint32_t seed = 1) {
    std::vector<Corruption> out;
    for (size_t cut : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{64}, bytes.size() / 2, bytes.size() - 1})
        if (cut < bytes.size()) out.push_back({fmt::format("truncated to {} bytes", cut), bytes.substr(0, cut)});
    std::mt19937 rng(seed);
    for (size_t i = 0; i < count && !bytes.empty(); ++i) {
        const size_t at = rng() % bytes.size();
        const unsigned char old = static_cast<unsigned char>(bytes[at]);
        const unsigned char choices[] = {0x00, 0xff, 0x7f, 0x80, static_cast<unsigned char>(old ^ (1u << (rng() % 8)))};
        std::string changed = bytes;
        changed[at] = static_cast<char>(choices[rng() % 5]);
        out.push_back({fmt::format("byte {} changed from {:#04x} to {:#04x}", at, old,
                                   static_cast<unsigned char>(changed[at])), changed});
    }
    for (size_t at = 0; at + 4 <= std::min<size_t>(bytes.size(), 64); at += 4)
        for (const char* word : {"\x00\x00\x00\x00", "\xff\xff\xff\xff"}) {
            std::string changed = bytes;
            changed.replace(at, 4, word, 4);
            out.push_back({fmt::format("bytes {}..{} set to {:#04x}", at, at + 3, static_cast<unsigned char>(word[0])),
                           changed});
        }
    out.push_back({"junk appended", bytes + std::string("\0junk\xff", 6)});
    return out;
}

// Text files of one record a line: `count` lines (drawn with a fixed seed) deleted, duplicated or
// replaced by junk, and the file cut to its first line and to nothing.
inline std::vector<Corruption> line_corruptions(const std::string& text, size_t count = 24, uint32_t seed = 1) {
    std::vector<std::string> lines;
    for (size_t at = 0; at <= text.size();) {
        const size_t end = std::min(text.find('\n', at), text.size());
        lines.push_back(text.substr(at, end - at));
        at = end + 1;
    }
    auto join = [](const std::vector<std::string>& ls) {
        std::string s;
        for (size_t i = 0; i < ls.size(); ++i) s += (i ? "\n" : "") + ls[i];
        return s;
    };
    std::vector<Corruption> out = {{"empty", ""}, {"first line only", lines.front()}};
    std::mt19937 rng(seed);
    const char* junk[] = {"\xff\xfe", "a", "a b c", "{\"x\": 1}", "\x01\x02", "#version: 0.2"};
    for (size_t i = 0; i < count; ++i) {
        std::vector<std::string> changed = lines;
        const size_t at = rng() % lines.size();
        switch (rng() % 3) {
            case 0: changed.erase(changed.begin() + static_cast<std::ptrdiff_t>(at)); break;
            case 1: changed.insert(changed.begin() + static_cast<std::ptrdiff_t>(at), lines[at]); break;
            default: changed[at] = junk[rng() % 6];
        }
        out.push_back({fmt::format("line {} deleted, doubled or replaced", at + 1), join(changed)});
    }
    return out;
}

inline std::string read_whole_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in.good(), "cannot read ", path);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void overwrite_file(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

// Corrupts the file at `path` in each way in turn, calling `read` after each, and restores it at the
// end; then as check_corruptions.
inline size_t check_file_corruptions(const std::string& path, const std::vector<Corruption>& corruptions,
                                     const std::function<void()>& read, const std::string& names);

// Runs `read` on each corruption. Each must either be read (a corruption the format cannot see,
// such as a flipped bit in a weight) or raise an ampgrad::Error whose message contains `names`
// (the file, or what the reader calls it). Returns how many were refused.
inline size_t check_corruptions(const std::vector<Corruption>& corruptions,
                                const std::function<void(const std::string& bytes)>& read, const std::string& names) {
    size_t refused = 0;
    for (const Corruption& c : corruptions) {
        INFO("corruption: ", c.what);
        try {
            read(c.bytes);
        } catch (const ampgrad::Error& e) {
            ++refused;
            const std::string message = e.what();
            CHECK_MESSAGE(message.find(names) != std::string::npos, message);
        } catch (const std::exception& e) {
            FAIL_CHECK("not an ampgrad::Error: " << std::string(e.what()));
        }
    }
    return refused;
}

inline size_t check_file_corruptions(const std::string& path, const std::vector<Corruption>& corruptions,
                                     const std::function<void()>& read, const std::string& names) {
    const std::string valid = read_whole_file(path);
    const size_t refused = check_corruptions(corruptions, [&](const std::string& bytes) {
        overwrite_file(path, bytes);
        read();
    }, names);
    overwrite_file(path, valid);
    return refused;
}

}  // namespace ampgrad::testing
