// json_file.cpp: nlohmann::json's exceptions as FormatErrors naming the file (core/json_file.hpp).
#include "core/json_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ampgrad {

std::string json_error_text(const nlohmann::json::exception& e) {
    std::string text = e.what();
    const size_t end_of_prefix = text.find("] ");
    if (text.rfind("[json.exception.", 0) == 0 && end_of_prefix != std::string::npos) text = text.substr(end_of_prefix + 2);
    if (dynamic_cast<const nlohmann::json::type_error*>(&e)) return "a value has the wrong type: " + text;
    if (dynamic_cast<const nlohmann::json::out_of_range*>(&e)) return "a key or an entry is missing: " + text;
    if (dynamic_cast<const nlohmann::json::parse_error*>(&e)) return "not valid JSON (corrupt or truncated?): " + text;
    return text;
}

FormatError json_format_error(const std::string& op, const std::string& file, const nlohmann::json::exception& e) {
    return FormatError(fmt::format("{}: {}: {}", op, file, json_error_text(e)));
}

nlohmann::json read_json_file(const std::string& path, const std::string& op) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw IOError(fmt::format("{}: {}: cannot open: {}", op, path, std::strerror(errno)));
    std::stringstream text;
    text << in.rdbuf();
    if (in.bad()) throw IOError(fmt::format("{}: {}: cannot read: {}", op, path, std::strerror(errno)));
    return with_json_errors(op, path, [&] { return nlohmann::json::parse(text.str()); });
}

}  // namespace ampgrad
