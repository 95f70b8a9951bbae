// gemm_kernels.cpp: the CPU GEMM kernel table (issue 24). For each GEMM of the bundled GPT's
// training step (presets tiny and small, B=16: each linear's forward y = x W^T, its input gradient
// dx = dy W and its weight gradient dW = dy^T x) it times kernels::gemm on every CPU path
// (cpu/gemm_select.hpp, through kernels/capabilities.hpp: Eigen and oneDNN for f32, widened Eigen and oneDNN's matmul for bf16) and
// prints GFLOP/s beside the machine's peak, measured by a register-resident FMA loop (f32: vfmadd
// on 512-bit registers where the CPU has AVX-512, else 256-bit; bf16: vdpbf16ps where it has
// avx512_bf16). Then the fused bias+GELU epilogue against the plain product on the MLP's shapes.
// Timing: the best wall time of --repeats runs after two warm-ups (the best is the steadiest figure
// on a shared machine). The peak is timed by each thread's own CPU time. Run: build/bench/bench_gemm_kernels --threads 2 (docs/benchmarks.md).
#include <immintrin.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include <ampgrad/ampgrad.h>

#include "bench/bench_util.hpp"
#include "kernels/fused_kernels.hpp"
#include "kernels/capabilities.hpp"

using namespace ampgrad;

namespace {

constexpr int64_t kPeakIterations = 20'000'000;

// Stores one lane so the compiler keeps the loop.
__attribute__((target("avx512f"))) void keep(__m512 v) {
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, v);
    volatile float sink = lanes[0];
    (void)sink;
}

// 16 independent FMA chains held in registers; returns the flops done.
__attribute__((target("avx512f"))) double fma_loop_avx512(float seed) {
    __m512 acc[16], x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
    for (auto& a : acc) a = _mm512_set1_ps(seed);
    for (int64_t i = 0; i < kPeakIterations; ++i)
        for (auto& a : acc) a = _mm512_fmadd_ps(a, x, y);
    for (int i = 1; i < 16; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
    keep(acc[0]);
    return 2.0 * 16 * 16 * static_cast<double>(kPeakIterations);
}
__attribute__((target("avx2,fma"))) double fma_loop_avx2(float seed) {
    __m256 acc[12], x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
    for (auto& a : acc) a = _mm256_set1_ps(seed);
    for (int64_t i = 0; i < kPeakIterations; ++i)
        for (auto& a : acc) a = _mm256_fmadd_ps(a, x, y);
    for (int i = 1; i < 12; ++i) acc[0] = _mm256_add_ps(acc[0], acc[i]);
    alignas(32) float out[8];
    _mm256_store_ps(out, acc[0]);
    volatile float sink = out[0];
    (void)sink;
    return 2.0 * 12 * 8 * static_cast<double>(kPeakIterations);
}
// vdpbf16ps: 32 bf16 products summed pairwise into 16 f32 lanes (64 flops) per instruction.
__attribute__((target("avx512f,avx512bf16"))) double dpbf16_loop(float seed) {
    __m512 acc[16];
    const __m512bh x = (__m512bh)_mm512_set1_epi16(0x3f80), y = (__m512bh)_mm512_set1_epi16(0x3380);
    for (auto& a : acc) a = _mm512_set1_ps(seed);
    for (int64_t i = 0; i < kPeakIterations; ++i)
        for (auto& a : acc) a = _mm512_dpbf16_ps(a, x, y);
    for (int i = 1; i < 16; ++i) acc[0] = _mm512_add_ps(acc[0], acc[i]);
    keep(acc[0]);
    return 4.0 * 16 * 16 * static_cast<double>(kPeakIterations);
}

double thread_cpu_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// GFLOP/s of `loop` on every thread at once, each thread's rate over its own CPU time (so time
// another process takes from a core does not count), summed; best of 3.
double peak_gflops(double (*loop)(float)) {
    double best = 0;
    for (int r = 0; r < 3; ++r) {
        double rate = 0;
#pragma omp parallel reduction(+ : rate)
        {
            const double t0 = thread_cpu_seconds();
            const double flops = loop(1.0f);
            rate += flops / (thread_cpu_seconds() - t0) / 1e9;
        }
        best = std::max(best, rate);
    }
    return best;
}

struct Shape3 {
    std::string name;
    int64_t m, n, k;
    bool trans_a, trans_b;
};

// The step's GEMMs for a preset: M = B*T rows; per linear (K -> N): forward, dx, dW.
std::vector<Shape3> gpt_shapes(const std::string& preset, int64_t rows, int64_t c, int64_t vocab) {
    struct Linear { const char* name; int64_t in, out; };
    const Linear linears[] = {{"qkv", c, 3 * c}, {"proj", c, c}, {"fc", c, 4 * c}, {"fc2", 4 * c, c}, {"head", c, vocab}};
    std::vector<Shape3> shapes;
    for (const Linear& l : linears) {
        shapes.push_back({preset + " " + l.name + " fwd", rows, l.out, l.in, false, true});
        shapes.push_back({preset + " " + l.name + " dx", rows, l.in, l.out, false, false});
        shapes.push_back({preset + " " + l.name + " dW", l.out, l.in, rows, true, false});
    }
    return shapes;
}

// The best wall time of `repeats` runs of fn() after two warm-ups. (Process CPU time is no use
// here: Linux adds another thread's running time only at a tick or a switch, so a product of a few
// milliseconds on two threads reads as one thread's time.)
template <typename Fn>
double best_seconds(int repeats, Fn&& fn) {
    fn();
    fn();
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
        const double t0 = bench::now_seconds();
        fn();
        best = std::min(best, bench::now_seconds() - t0);
    }
    return best;
}

// GFLOP/s of kernels::gemm on one shape, dtype and library.
double gemm_gflops(const Shape3& s, DType dt, GemmLibrary library, int repeats) {
    set_cpu_gemm_library(library);
    TensorOptions o(dt);
    Tensor a = randn(s.trans_a ? Shape{s.k, s.m} : Shape{s.m, s.k}, o);
    Tensor b = randn(s.trans_b ? Shape{s.n, s.k} : Shape{s.k, s.n}, o);
    Tensor out = empty({s.m, s.n}, o);
    const double t = best_seconds(repeats, [&] { kernels::gemm(out, a, b, s.trans_a, s.trans_b, 1.0, 0.0); });
    set_cpu_gemm_library(GemmLibrary::kBest);
    return 2.0 * s.m * s.n * s.k / t / 1e9;
}

// Milliseconds of the fused bias+GELU GEMM and of the plain product, forward y = x W^T.
void epilogue_row(const Shape3& s, int repeats) {
    Tensor x = randn({s.m, s.k}), w = randn({s.n, s.k}), bias = randn({s.n});
    Tensor out = empty({s.m, s.n}), aux = empty({s.m, s.n});
    const double plain = best_seconds(repeats, [&] { kernels::gemm(out, x, w, false, true, 1.0, 0.0); });
    const double fused = best_seconds(repeats, [&] {
        kernels::gemm_epilogue(out, aux, x, w, false, true, bias, GemmEpilogue::kBiasGeluTanh);
    });
    std::printf("| %s | %lldx%lldx%lld | %.3f | %.3f | %.3f |\n", s.name.c_str(), (long long)s.m, (long long)s.n,
                (long long)s.k, plain * 1e3, fused * 1e3, (fused - plain) * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"CPU GEMM kernel table: GFLOP/s per GPT shape and path, beside the measured peak"};
    int threads = 2, repeats = 10;
    app.add_option("--threads", threads, "threads (OpenMP, shared by oneDNN)");
    app.add_option("--repeats", repeats, "timed runs per cell (the best is reported)");
    CLI11_PARSE(app, argc, argv);
    set_num_threads(threads);
    manual_seed(0);

    const bool avx512 = __builtin_cpu_supports("avx512f"), bf16 = __builtin_cpu_supports("avx512bf16");
    const double f32_peak = avx512 ? peak_gflops(fma_loop_avx512) : peak_gflops(fma_loop_avx2);
    const double avx2_peak = peak_gflops(fma_loop_avx2);
    const double bf16_peak = bf16 ? peak_gflops(dpbf16_loop) : f32_peak;
    std::printf("threads %d; measured peak GFLOP/s: f32 %.1f (%s FMA), f32 256-bit FMA %.1f, bf16 %.1f (%s)\n", threads,
                f32_peak, avx512 ? "512-bit" : "256-bit", avx2_peak, bf16_peak, bf16 ? "vdpbf16ps" : "no avx512_bf16");
    std::printf("paths: f32 %s, bf16 %s\n\n", gemm_route(kCPU, kFloat32).c_str(),
                gemm_route(kCPU, kBFloat16).c_str());

    std::printf("cells: GFLOP/s (wall, best of %d) and %% of the measured peak (f32 or bf16)\n\n", repeats);
    std::printf("| GEMM | M x N x K | layout | f32 eigen | f32 onednn | bf16 widened eigen | bf16 onednn |\n"
                "|---|---|---|---:|---:|---:|---:|\n");
    std::vector<Shape3> shapes = gpt_shapes("tiny", 1024, 128, 256);
    for (const Shape3& s : gpt_shapes("small", 2048, 256, 256)) shapes.push_back(s);
    auto cell = [](double gflops, double peak) { std::printf(" %.0f (%.0f%%) |", gflops, 100.0 * gflops / peak); };
    for (const Shape3& s : shapes) {
        std::printf("| %s | %lldx%lldx%lld | %c%c |", s.name.c_str(), (long long)s.m, (long long)s.n, (long long)s.k,
                    s.trans_a ? 'T' : 'N', s.trans_b ? 'T' : 'N');
        cell(gemm_gflops(s, kFloat32, GemmLibrary::kEigen, repeats), f32_peak);
        cell(gemm_gflops(s, kFloat32, GemmLibrary::kBest, repeats), f32_peak);
        cell(gemm_gflops(s, kBFloat16, GemmLibrary::kEigen, repeats), bf16_peak);
        cell(gemm_gflops(s, kBFloat16, GemmLibrary::kBest, repeats), bf16_peak);
        std::printf("\n");
    }

    std::printf("\nf32 bias+GELU epilogue (path %s), ms:\n\n| GEMM | M x N x K | product | product + "
                "bias + GELU | epilogue |\n|---|---|---:|---:|---:|\n",
                gemm_route(kCPU, kFloat32).c_str());
    epilogue_row({"tiny fc fwd", 1024, 512, 128, false, true}, repeats);
    epilogue_row({"small fc fwd", 2048, 1024, 256, false, true}, repeats);
    return 0;
}
