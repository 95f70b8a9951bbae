// bench_util.hpp: small helpers shared by the C++ benchmarks: wall and CPU clocks, the median of
// repeats, and the process's resident memory (read from /proc, the same way the PyTorch peers
// in bench/torch_*.py read it) so the two sides report time and memory identically.
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <ctime>
#include <fstream>
#include <string>
#include <vector>

namespace bench {

inline double now_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// CPU time of the whole process (all threads). On a busy shared machine this is steadier than
// wall time, because it does not count the time the process spent waiting for a core.
inline double cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// A field of /proc/self/status in KiB ("VmRSS": resident now, "VmHWM": peak resident).
inline int64_t proc_status_kib(const std::string& field) {
    std::ifstream in("/proc/self/status");
    std::string key;
    int64_t value = 0;
    while (in >> key) {
        if (key == field + ":") {
            in >> value;
            return value;
        }
        in.ignore(1 << 12, '\n');
    }
    return -1;
}

// Reset the peak-RSS mark (VmHWM) to the current RSS; false if the kernel refuses.
inline bool reset_peak_rss() {
    std::ofstream out("/proc/self/clear_refs");
    out << "5";
    out.flush();
    return static_cast<bool>(out);
}

}  // namespace bench
