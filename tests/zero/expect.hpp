// expect.hpp: EXPECT for the multi-process ZeRO scenarios (tests/zero/*_scenarios.cpp, run by
// tests/dist/dist_worker one scenario per process): a failed check prints its line and is counted,
// and the scenario goes on, so one run reports every mismatch; the process exits non-zero when
// scenario_failures() is not 0.
#pragma once
#include <cstdio>

namespace ampgrad::testing {

inline int& scenario_failures() {
    static int failures = 0;
    return failures;
}

}  // namespace ampgrad::testing

#define EXPECT(cond, ...)                                   \
    do {                                                    \
        if (!(cond)) {                                      \
            std::printf("FAIL line %d: ", __LINE__);        \
            std::printf(__VA_ARGS__);                       \
            std::printf("\n");                              \
            ++ampgrad::testing::scenario_failures();        \
        }                                                   \
    } while (0)
