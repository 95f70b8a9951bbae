// app/flight_report.cpp: `ampgrad fr DIR` (see flight_report.hpp).
#include "app/flight_report.hpp"

#include "dist/flight_analysis.hpp"

#include <cstdio>

namespace ampgrad::app {

int run_flight_report(const std::string& dir) {
    const std::vector<dist::FlightDump> dumps = dist::read_flight_dumps(dir);
    const std::string report = dist::flight_report(dumps, dist::analyze_flight_dumps(dumps));
    std::fputs(report.c_str(), stdout);
    return 0;
}

}  // namespace ampgrad::app
