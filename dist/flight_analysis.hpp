// dist/flight_analysis.hpp: reading the ranks' flight-recorder dumps side by side (`ampgrad fr DIR`).
//
// Every rank numbers the collectives of a group in the order it issues them (collective_seq_id), so
// on a healthy run entry #s is the same collective on every rank. The analysis walks the sequence
// numbers that every dump still holds, group by group, and reports the first one where the ranks
// disagree: a rank that never issued it ("missing collective"), a different op, a different size or
// dtype, or a different calling site (the ranks are at different places in the program, as when
// one skipped a collective and its later calls paired with the others' earlier ones). The rank that
// is behind is the one that issued the fewest collectives: the others are waiting for it.
// As PyTorch's `torch.distributed.flight_recorder` analyzer does for its dumps.
#pragma once
#include "dist/flight_recorder.hpp"

#include <string>
#include <vector>

namespace ampgrad::dist {

struct FlightFinding {
    std::string group;
    bool agree = true;                    // no disagreement in the window every dump holds
    int64_t first_seq = -1;               // the first collective_seq_id where the ranks disagree
    std::string kind;                     // "missing collective", "different op", "size mismatch", "different call site"
    std::vector<int> behind;              // the ranks that issued the fewest collectives (empty: none behind)
    std::vector<int> not_completed;       // ranks whose last collective did not complete
    std::vector<std::string> lines;       // the report, one line each
};

// Every DIR/flight_recorder_rank<R>.json, by rank. IOError when there are none or one is unreadable;
// ValueError (from parse_flight_dump) when one is not a dump.
std::vector<FlightDump> read_flight_dumps(const std::string& dir);

// One finding per process group found in the dumps.
std::vector<FlightFinding> analyze_flight_dumps(const std::vector<FlightDump>& dumps);

// The whole report as text: the dumps read, then each group's finding.
std::string flight_report(const std::vector<FlightDump>& dumps, const std::vector<FlightFinding>& findings);

}  // namespace ampgrad::dist
