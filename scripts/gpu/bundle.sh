#!/usr/bin/env bash
# bundle.sh BUILD_DIR OUT_DIR: (the project's copy of the workplace's GPU scripts, with scripts/gpu/run.sh
# beside it) pack a CUDA build of ampgrad made HERE (Debian 12, nvcc 13) so that it
# runs on a GPU machine that has the NVIDIA driver and CUDA 13 libraries but no compiler set-up, no apt
# and no registry. Nothing is compiled there: the GPU's minutes go to running, not building.
#
# OUT_DIR gets libampgrad.so, the CUDA/dist test programs, the `ampgrad` command, `ampgrad-run`, the
# benchmarks the steps run (BUNDLE_BENCHES, default bench_gpt_step bench_gemm_kernels bench_llama_step:
# all 15 came to 65 MiB with the rest, on 2026-12-07), tests/fixtures, the Debian shared libraries they
# need (fmt, gloo, ...; never glibc, libstdc++ or the CUDA libraries, which the GPU machine has), the
# bench/*.py PyTorch peers, and run.sh. Typical size: 53 MiB (2026-12-07); over BUNDLE_LIMIT_MIB (64,
# what a lent GPU carries) it fails, naming the largest parts. Then, on the GPU machine, from the folder
# that holds OUT_DIR:
#     bash OUT_DIR/run.sh [STEP...]        (steps: see run.sh; logs go to $OUT or OUT_DIR/logs)
# The build must have CUDA on (meson ... -Dcuda=enabled, with /usr/local/cuda/bin on PATH) and be
# current (ninja -C BUILD_DIR first). Extra files or programs: list them in BUNDLE_EXTRA (paths
# relative to BUILD_DIR or the source root), e.g. BUNDLE_EXTRA="tests/test_ops tools/my_probe".
set -euo pipefail
B=$(cd "${1:?usage: bundle.sh BUILD_DIR OUT_DIR}" && pwd)
O=${2:?usage: bundle.sh BUILD_DIR OUT_DIR}
# The source tree Meson recorded (meson-info.json: {"directories": {"source": ...}}), so that a build
# folder outside the checkout (meson setup /elsewhere/build) finds tests/fixtures and bench/*.py.
SRC=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["directories"]["source"])' \
      "$B/meson-info/meson-info.json" 2>/dev/null || true)
[ -n "$SRC" ] && [ -d "$SRC/tests/fixtures" ] || { echo "bundle: cannot read the source folder from $B/meson-info/meson-info.json" >&2; exit 1; }
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
[ -f "$B/libampgrad.so" ] || { echo "bundle: no $B/libampgrad.so: build first" >&2; exit 1; }
# grep -c reads to the end: grep -q would stop early and, under pipefail, readelf's SIGPIPE fail the test
readelf -d "$B/libampgrad.so" | grep -c 'libcudart' > /dev/null || { echo "bundle: $B was built without CUDA (-Dcuda=enabled, nvcc on PATH)" >&2; exit 1; }
rm -rf "$O"; mkdir -p "$O/deps" "$O/tests" "$O/app" "$O/tools" "$O/bench"
cp "$B/libampgrad.so" "$O/"
for f in tests/test_cuda tests/test_dist tests/dist_worker app/ampgrad tools/ampgrad-run; do
    [ -x "$B/$f" ] && cp "$B/$f" "$O/$f"
done
for f in ${BUNDLE_BENCHES:-bench_gpt_step bench_gemm_kernels bench_llama_step}; do
    [ -x "$B/bench/$f" ] && cp "$B/bench/$f" "$O/bench/"
done
cp "$SRC"/bench/*.py "$O/bench/" 2>/dev/null || true
cp -r "$SRC/tests/fixtures" "$O/tests/"
for f in ${BUNDLE_EXTRA:-}; do
    if [ -e "$B/$f" ]; then mkdir -p "$O/$(dirname "$f")"; cp -r "$B/$f" "$O/$f"
    elif [ -e "$SRC/$f" ]; then mkdir -p "$O/$(dirname "$f")"; cp -r "$SRC/$f" "$O/$f"
    else echo "bundle: BUNDLE_EXTRA $f not found" >&2; exit 1; fi
done
# The shared libraries the programs need that a plain GPU image lacks: everything ldd resolves except
# glibc, the C++ runtime and the CUDA/NCCL libraries.
skip='linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread|librt\.so|libstdc\+\+|libgcc_s|libcuda|libcublas|libnccl|libampgrad'
for exe in "$O/libampgrad.so" $(find "$O/tests" "$O/app" "$O/tools" "$O/bench" -maxdepth 1 -type f -perm -u+x); do
    ldd "$exe" 2>/dev/null | awk '/=>/ {print $1, $3}' | grep -vE "$skip" | while read -r name path; do
        if [ -f "$path" ] && [ ! -e "$O/deps/$name" ]; then cp -L "$path" "$O/deps/$name"; fi
    done || true
done
strip --strip-unneeded "$O/libampgrad.so" "$O"/tests/* "$O"/app/* "$O"/tools/* "$O"/bench/bench_* 2>/dev/null || true
# The libraries travel compressed (oneDNN's alone is about 40 MB, 8 MB packed): a lent GPU takes at most
# 64 MiB of carried files. run.sh unpacks them on its first run.
tar -C "$O" -czf "$O/deps.tar.gz" deps && rm -rf "$O/deps"
cp "$HERE/run.sh" "$HERE/determinism.sh" "$O/"
{ echo "built: $(date -u +%FT%TZ)"; echo "commit: $(git -C "$SRC" rev-parse --short HEAD 2>/dev/null)$(git -C "$SRC" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')";
  echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)"; } > "$O/BUILD_INFO"
bytes=$(du -sb "$O" | cut -f1)
echo "bundle: $((bytes / 1048576)) MiB in $O"
if [ "$bytes" -gt $(( ${BUNDLE_LIMIT_MIB:-64} * 1048576 )) ]; then
    echo "bundle: over ${BUNDLE_LIMIT_MIB:-64} MiB, more than a lent GPU carries; the largest parts:" >&2
    du -ab "$O" | sort -rn | sed -n '2,6p' >&2
    exit 1
fi
