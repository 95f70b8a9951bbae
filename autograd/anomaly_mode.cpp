// anomaly_mode.cpp: creation traces (glibc backtrace + demangling) and the NaN/inf check run
// on every backward result while anomaly mode is on.
#include "autograd/anomaly_mode.hpp"

#include <cxxabi.h>
#include <execinfo.h>

#include <atomic>
#include <cstdlib>

#include "autograd/grad_mode.hpp"
#include "autograd/ops/ops.hpp"
#include "core/error.hpp"

namespace ampgrad::autograd {

namespace {
std::atomic<bool> g_anomaly{false};

// "./prog(_ZN3foo3barEv+0x1c) [0x...]" -> "foo::bar()"
std::string demangle_frame(const char* frame) {
    std::string s(frame);
    auto open = s.find('('), plus = s.find('+', open == std::string::npos ? 0 : open);
    if (open == std::string::npos || plus == std::string::npos || plus <= open + 1) return s;
    std::string mangled = s.substr(open + 1, plus - open - 1);
    int status = 0;
    char* name = abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status);
    std::string out = status == 0 && name ? name : mangled;
    std::free(name);
    return out;
}
}  // namespace

bool anomaly_mode_enabled() { return g_anomaly.load(std::memory_order_relaxed); }
void set_anomaly_mode_enabled(bool enabled) { g_anomaly.store(enabled); }

std::string capture_creation_trace() {
    void* frames[48];
    int n = backtrace(frames, 48);
    char** symbols = backtrace_symbols(frames, n);
    std::string trace;
    int kept = 0;
    for (int i = 1; i < n && kept < 12 && symbols; ++i) {
        std::string f = demangle_frame(symbols[i]);
        if (f.find("ampgrad::autograd::record") != std::string::npos ||
            f.find("capture_creation_trace") != std::string::npos)
            continue;
        trace += fmt::format("  #{} {}\n", kept++, f);
    }
    std::free(symbols);
    return trace;
}

void check_anomaly(const Node& node, const tensor_list& grads) {
    NoGradGuard no_grad;
    for (size_t i = 0; i < grads.size(); ++i) {
        const Tensor& g = grads[i];
        if (!g.defined() || !is_floating(g.dtype())) continue;
        if (logical_not(isfinite(g)).to(kFloat64).sum().item<double>() == 0.0) continue;
        throw AutogradError(fmt::format(
            "Function '{}' returned nan or inf values in its {}th output ({}).\nThe forward call that created it "
            "(op '{}'):\n{}",
            node.name(), i, g.describe(), node.op(),
            node.creation_trace.empty() ? "  <no trace: the node was made before anomaly mode was enabled>\n"
                                        : node.creation_trace));
    }
}

}  // namespace ampgrad::autograd
