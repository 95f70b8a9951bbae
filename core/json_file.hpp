// json_file.hpp: reading the JSON files a run depends on (config.json, state.json, manifests,
// adapter configs, meta.json, traces) so that every failure is a FormatError naming the file.
// nlohmann::json reports a missing key or a value of the wrong type with its own exception
// ("[json.exception.type_error.302] type must be number, but is string"), which names neither
// the file nor an ampgrad error type; the readers run their whole reading of a file inside
// with_json_errors, which turns that exception into a FormatError that does.
//
//   nlohmann::json j = read_json_file(path, "from_pretrained");           // IOError / FormatError
//   Config c = with_json_errors("from_pretrained", path, [&] { return config_from(j); });
#pragma once
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.hpp"

namespace ampgrad {

// nlohmann::json's message without its "[json.exception.NAME.ID] " prefix, and what kind of
// mistake in the file it means: "a value has the wrong type: type must be number, but is string".
std::string json_error_text(const nlohmann::json::exception& e);

// The FormatError for `e` met while `op` read `file`: "op: file: <json_error_text(e)>".
FormatError json_format_error(const std::string& op, const std::string& file, const nlohmann::json::exception& e);

// Parses the file at `path`: IOError when it cannot be read, FormatError (naming `op` and the file)
// when it is not JSON.
nlohmann::json read_json_file(const std::string& path, const std::string& op);

// Runs `read` (which reads values out of the JSON of `file`), turning nlohmann::json's exceptions
// into an Error (FormatError, or a reader's own subtype such as zero::CheckpointError) with the
// message of json_format_error(op, file, e). Any other exception passes through unchanged.
template <class Error = FormatError, class Read>
auto with_json_errors(const std::string& op, const std::string& file, Read&& read) -> decltype(read()) {
    try {
        return std::forward<Read>(read)();
    } catch (const nlohmann::json::exception& e) {
        throw Error(json_format_error(op, file, e).what());
    }
}

}  // namespace ampgrad
