// gemm_paths.cpp: the CPU GEMM path table's state (the pinned library, the backend's chooser).
// The library starts as AMPGRAD_CPU_GEMM says ("best", the default, or "eigen"), so a benchmark can
// run the same binary on both.
#include "core/gemm_paths.hpp"

#include <atomic>
#include <cstdlib>
#include <string_view>

#include "core/error.hpp"

namespace ampgrad {

namespace {
std::atomic<GemmPathChooser> g_chooser{nullptr};

GemmLibrary library_from_environment() {
    const char* value = std::getenv("AMPGRAD_CPU_GEMM");
    const std::string_view v = value ? value : "";
    if (v.empty() || v == "best") return GemmLibrary::kBest;
    if (v == "eigen") return GemmLibrary::kEigen;
    throw ValueError(fmt::format("AMPGRAD_CPU_GEMM: expected 'best' or 'eigen', got '{}'", v));
}

std::atomic<GemmLibrary>& library_slot() {
    static std::atomic<GemmLibrary> slot{library_from_environment()};
    return slot;
}
}  // namespace

const char* gemm_path_name(GemmPath path) {
    switch (path) {
        case GemmPath::kEigen: return "eigen";
        case GemmPath::kWidenedEigen: return "widened to f32, eigen";
        case GemmPath::kOneDnnSgemm: return "onednn sgemm";
        case GemmPath::kWidenedOneDnnSgemm: return "widened to f32, onednn sgemm";
        case GemmPath::kOneDnnMatmul: return "onednn matmul (f32 accumulation)";
    }
    return "?";
}

void set_cpu_gemm_library(GemmLibrary library) { library_slot().store(library); }
GemmLibrary cpu_gemm_library() { return library_slot().load(); }

GemmPath cpu_gemm_path(DType dtype) {
    if (!is_floating(dtype))
        throw DTypeError(fmt::format("cpu_gemm_path: expected a floating dtype, got {}", dtype_name(dtype)));
    GemmPathChooser chooser = g_chooser.load();
    AMPGRAD_CHECK(chooser != nullptr, "cpu_gemm_path: the CPU backend registered no GEMM chooser");
    return chooser(dtype, library_slot().load());
}

void register_cpu_gemm_chooser(GemmPathChooser chooser) { g_chooser.store(chooser); }

}  // namespace ampgrad
