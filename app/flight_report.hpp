// app/flight_report.hpp: `ampgrad fr DIR`: reads the ranks' flight-recorder dumps
// (flight_recorder_rank<R>.json, written on a collective timeout, SIGTERM or SIGUSR1) and prints,
// per process group, the first collective where the ranks disagree and which rank is behind
// (dist/flight_analysis.hpp; docs/distributed.md, "Reading a flight recorder").
#pragma once
#include <string>

namespace ampgrad::app {

// Prints the report to stdout; 0 when it could be made (IOError / ValueError otherwise).
int run_flight_report(const std::string& dir);

}  // namespace ampgrad::app
