// trace_merge.cpp: `ampgrad trace merge` (app/trace_merge.hpp).
#include "app/trace_merge.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>

#include <fmt/format.h>

#include "app/profile_run.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace ampgrad::app {

namespace fs = std::filesystem;

std::vector<std::string> trace_files(const std::string& file_or_folder) {
    if (!fs::is_directory(file_or_folder)) return {file_or_folder};
    std::map<int, std::string> by_rank;
    const std::regex rank_file(R"(trace\.rank(\d+)\.json)");
    for (const fs::directory_entry& e : fs::directory_iterator(file_or_folder)) {
        const std::string name = e.path().filename().string();
        std::smatch m;
        if (name == "trace.json") by_rank[0] = e.path().string();
        else if (std::regex_match(name, m, rank_file)) by_rank[std::stoi(m[1].str())] = e.path().string();
    }
    if (by_rank.empty())
        throw IOError(fmt::format("trace merge: {} holds no trace.json or trace.rank<R>.json (written by train --profile)",
                                  file_or_folder));
    std::vector<std::string> files;
    for (const auto& [rank, path] : by_rank) files.push_back(path);
    return files;
}

nlohmann::json merge_traces(const std::vector<std::string>& files) {
    nlohmann::json events = nlohmann::json::array();
    std::map<int64_t, size_t> owner;   // pid -> the input (index in files) whose spans are on that track
    for (size_t i = 0; i < files.size(); ++i) {
        const nlohmann::json trace = read_chrome_trace(files[i], "trace merge");
        for (const nlohmann::json& e : trace["traceEvents"]) {
            if (!e.is_object() || (e.contains("pid") && !e["pid"].is_number_integer()))
                throw FormatError(fmt::format("trace merge: {}: an event that is not an object with an integer \"pid\": {}",
                                              files[i], e.dump().substr(0, 200)));
            const int64_t pid = e.value("pid", int64_t{0});
            auto [it, fresh] = owner.emplace(pid, i);
            if (!fresh && it->second != i)
                throw FormatError(fmt::format("trace merge: {} and {} both hold spans of process track {} (the same "
                                              "rank twice?)", files[it->second], files[i], pid));
            events.push_back(e);
        }
    }
    return {{"traceEvents", events}, {"displayTimeUnit", "ms"}};
}

int run_trace_merge(const std::vector<std::string>& inputs, const std::string& out) {
    std::vector<std::string> files;
    for (const std::string& in : inputs)
        for (const std::string& f : trace_files(in)) files.push_back(f);
    const nlohmann::json merged = merge_traces(files);
    write_file_atomic(out, merged.dump());
    std::printf("merged %zu trace(s), %zu events, into %s\n", files.size(), merged["traceEvents"].size(), out.c_str());
    return 0;
}

}  // namespace ampgrad::app
