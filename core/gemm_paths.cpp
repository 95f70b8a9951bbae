// gemm_paths.cpp: the CPU GEMM path table's state (the pinned library, the backend's chooser).
#include "core/gemm_paths.hpp"

#include <atomic>

#include "core/error.hpp"

namespace ampgrad {

namespace {
std::atomic<GemmLibrary> g_library{GemmLibrary::kBest};
std::atomic<GemmPathChooser> g_chooser{nullptr};
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

void set_cpu_gemm_library(GemmLibrary library) { g_library.store(library); }
GemmLibrary cpu_gemm_library() { return g_library.load(); }

GemmPath cpu_gemm_path(DType dtype) {
    if (!is_floating(dtype))
        throw DTypeError(fmt::format("cpu_gemm_path: expected a floating dtype, got {}", dtype_name(dtype)));
    GemmPathChooser chooser = g_chooser.load();
    AMPGRAD_CHECK(chooser != nullptr, "cpu_gemm_path: the CPU backend registered no GEMM chooser");
    return chooser(dtype, g_library.load());
}

void register_cpu_gemm_chooser(GemmPathChooser chooser) { g_chooser.store(chooser); }

}  // namespace ampgrad
