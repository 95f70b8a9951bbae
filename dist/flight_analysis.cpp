// dist/flight_analysis.cpp: the ranks' flight-recorder dumps compared sequence number by sequence
// number (see flight_analysis.hpp).
#include "dist/flight_analysis.hpp"

#include "core/error.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace ampgrad::dist {

namespace {

// A rank's entries of one group, by sequence number.
using RankEntries = std::map<int64_t, const FlightEntry*>;

std::string describe(const FlightEntry& e) {
    const std::string sizes = fmt::format("{}", fmt::join(e.input_sizes, ","));
    std::string what = e.op;
    if (!e.detail.empty()) what += "(" + e.detail + ")";
    if (!e.dtype.empty()) what += fmt::format(" {} [{}]", e.dtype, sizes);
    return fmt::format("#{} {} at {}, {}", e.collective_seq_id, what, e.site, e.state);
}

std::string rank_list(const std::vector<int>& ranks) { return fmt::format("{}", fmt::join(ranks, ", ")); }

// What two ranks' entries of one sequence number disagree on, "" when nothing.
std::string difference(const FlightEntry& a, const FlightEntry& b) {
    if (a.op != b.op) return "different op";
    if (a.detail != b.detail || a.dtype != b.dtype || a.numel != b.numel) return "size mismatch";
    if (a.site != b.site) return "different call site";
    return "";
}

// The ranks whose entry differs from the most common one (ties: the one the lowest rank holds).
std::vector<int> odd_ones(const std::map<int, const FlightEntry*>& at) {
    std::vector<int> best_group;
    for (const auto& [r, e] : at) {
        std::vector<int> same;
        for (const auto& [q, f] : at)
            if (difference(*e, *f).empty()) same.push_back(q);
        if (same.size() > best_group.size()) best_group = same;
    }
    std::vector<int> odd;
    for (const auto& [r, e] : at)
        if (std::find(best_group.begin(), best_group.end(), r) == best_group.end()) odd.push_back(r);
    return odd;
}

// Walks the common window of sequence numbers; fills the first disagreement into `f`.
void find_first_disagreement(const std::map<int, RankEntries>& ranks, FlightFinding& f) {
    int64_t start = 0, end = -1;
    for (const auto& [r, entries] : ranks) {
        if (entries.empty()) continue;
        start = std::max(start, entries.begin()->first);
        end = std::max(end, entries.rbegin()->first);
    }
    for (int64_t s = start; s <= end && f.agree; ++s) {
        std::map<int, const FlightEntry*> at;
        std::vector<int> missing;
        for (const auto& [r, entries] : ranks) {
            auto it = entries.find(s);
            if (it == entries.end()) missing.push_back(r);
            else at[r] = it->second;
        }
        std::string kind = missing.empty() ? "" : "missing collective";
        if (kind.empty())
            for (const auto& [r, e] : at)
                if (std::string d = difference(*at.begin()->second, *e); !d.empty() && kind.empty()) kind = d;
        if (kind.empty()) continue;
        f.agree = false;
        f.first_seq = s;
        f.kind = kind;
        f.lines.push_back(fmt::format("first disagreement at collective_seq_id {}: {}", s, kind));
        for (const auto& [r, e] : at) f.lines.push_back(fmt::format("  rank {}: {}", r, describe(*e)));
        for (int r : missing) f.lines.push_back(fmt::format("  rank {}: never issued it", r));
        if (missing.empty() && kind != "different call site")
            f.lines.push_back(fmt::format("  differing from the others: rank {}", rank_list(odd_ones(at))));
    }
}

// The ranks with the fewest collectives (when the counts differ), and where each rank stopped.
void find_behind(const std::map<int, RankEntries>& ranks, FlightFinding& f) {
    int64_t lowest = INT64_MAX, highest = -1;
    for (const auto& [r, entries] : ranks) {
        const int64_t last = entries.empty() ? -1 : entries.rbegin()->first;
        lowest = std::min(lowest, last);
        highest = std::max(highest, last);
        if (!entries.empty() && entries.rbegin()->second->state != "completed") f.not_completed.push_back(r);
    }
    if (lowest != highest)
        for (const auto& [r, entries] : ranks)
            if ((entries.empty() ? -1 : entries.rbegin()->first) == lowest) f.behind.push_back(r);
    for (const auto& [r, entries] : ranks)
        f.lines.push_back(entries.empty() ? fmt::format("rank {} recorded no collective", r)
                                          : fmt::format("rank {} last: {}", r, describe(*entries.rbegin()->second)));
    if (!f.behind.empty())
        f.lines.push_back(fmt::format("rank {} is behind: its last collective is #{}, the others reached #{}",
                                      rank_list(f.behind), lowest, highest));
    else if (!f.not_completed.empty())
        f.lines.push_back(fmt::format("every rank issued #{}; it did not complete on rank {}", highest,
                                      rank_list(f.not_completed)));
}

}  // namespace

std::vector<FlightDump> read_flight_dumps(const std::string& dir) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw IOError(fmt::format("flight recorder: {} is not a folder", dir));
    const std::regex name("flight_recorder_rank([0-9]{1,9})\\.json");   // a rank fits an int
    std::map<int, FlightDump> by_rank;
    for (const auto& item : fs::directory_iterator(dir)) {
        std::smatch m;
        const std::string file = item.path().filename().string();
        if (!std::regex_match(file, m, name)) continue;
        std::ifstream in(item.path(), std::ios::binary);
        std::stringstream text;
        text << in.rdbuf();
        if (!in) throw IOError(fmt::format("flight recorder: cannot read {}", item.path().string()));
        FlightDump d = parse_flight_dump(text.str(), item.path().string());
        if (d.rank != std::stoi(m[1]))
            throw ValueError(fmt::format("flight recorder: {} holds rank {}'s records", item.path().string(), d.rank));
        by_rank[d.rank] = std::move(d);
    }
    if (by_rank.empty())
        throw IOError(fmt::format("flight recorder: no flight_recorder_rank<R>.json in {}", dir));
    std::vector<FlightDump> out;
    for (auto& [r, d] : by_rank) out.push_back(std::move(d));
    return out;
}

std::vector<FlightFinding> analyze_flight_dumps(const std::vector<FlightDump>& dumps) {
    std::set<std::string> groups;
    for (const FlightDump& d : dumps)
        for (const FlightEntry& e : d.entries) groups.insert(e.process_group);
    std::vector<FlightFinding> findings;
    for (const std::string& g : groups) {
        std::map<int, RankEntries> ranks;
        for (const FlightDump& d : dumps) {
            RankEntries& mine = ranks[d.rank];
            for (const FlightEntry& e : d.entries)
                if (e.process_group == g) mine[e.collective_seq_id] = &e;
        }
        FlightFinding f;
        f.group = g;
        find_first_disagreement(ranks, f);
        find_behind(ranks, f);
        if (f.agree && f.behind.empty() && f.not_completed.empty())
            f.lines.push_back("the ranks agree: every collective matches and completed");
        findings.push_back(std::move(f));
    }
    return findings;
}

std::string flight_report(const std::vector<FlightDump>& dumps, const std::vector<FlightFinding>& findings) {
    std::vector<int> ranks;
    for (const FlightDump& d : dumps) ranks.push_back(d.rank);
    const int world = dumps.empty() ? 0 : dumps.front().world_size;
    std::string out = fmt::format("flight recorder dumps of rank {} (world size {})\n", rank_list(ranks), world);
    for (const FlightDump& d : dumps)
        out += fmt::format("  rank {}: {} entries ({} older dropped), written because: {}\n", d.rank, d.entries.size(),
                           d.dropped, d.reason);
    if (static_cast<int>(dumps.size()) < world) out += "  (the other ranks wrote no dump: they may be the ones lost)\n";
    for (const FlightFinding& f : findings) {
        out += fmt::format("group '{}':\n", f.group);
        for (const std::string& line : f.lines) out += "  " + line + "\n";
    }
    return out;
}

}  // namespace ampgrad::dist
