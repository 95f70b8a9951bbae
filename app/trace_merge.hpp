// trace_merge.hpp: `ampgrad trace merge`: the ranks' Chrome traces of one run (train --profile on
// several processes writes OUT/trace.json for rank 0 and OUT/trace.rank<R>.json for rank R, each
// with pid = R) joined into one file, so Perfetto shows one process track per rank on one timeline
// (their timestamps share the host's steady clock: core/profiler.hpp).
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ampgrad::app {

// The trace files an argument names: a file itself, or in a folder its trace.json and
// trace.rank<R>.json files (in rank order). IOError when a folder has none.
std::vector<std::string> trace_files(const std::string& file_or_folder);
// One trace holding every input's events. FormatError naming the file for one that is not a Chrome
// trace, or when two inputs hold spans of the same process track (pid).
nlohmann::json merge_traces(const std::vector<std::string>& files);
// Writes the merged trace to `out` (atomically) and prints what it holds.
int run_trace_merge(const std::vector<std::string>& inputs, const std::string& out);

}  // namespace ampgrad::app
