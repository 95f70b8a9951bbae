#!/usr/bin/env bash
# gpu_check.sh [LOGDIR]: the one command to run on a machine with an NVIDIA GPU (docs/cuda.md, "Running on
# a GPU"). It builds ampgrad with CUDA and runs everything that needs the GPU, writing one log per step
# and a summary into LOGDIR (default: $OUT when set, else gpu-logs/<UTC date>), which it names at the end:
#   device.txt     nvidia-smi, nvcc, the commit and the date
#   build.log      configure + build (scripts/setup.sh where apt works; else the .debs in
#                  $AMPGRAD_DEBS, made here by `scripts/offline_deps.sh pack DIR`)
#   cuda.log       meson test --suite cuda: every CUDA kernel against the CPU one, float64 gradcheck on
#                  the GPU, and the GPT training parity (fp32 losses, fp16 skip pattern)
#   dist.log       meson test --suite dist: the process groups, NCCL where it was built
#   memcheck.log   compute-sanitizer --tool memcheck over the cuda test program, when the tool exists
# Exit status: non-zero when a step failed. Knobs: AMPGRAD_BUILD_DIR (default build-gpu), AMPGRAD_DEBS.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LOGDIR="${1:-${OUT:-$ROOT/gpu-logs/$(date -u +%Y%m%d-%H%M%S)}}"
BUILD="${AMPGRAD_BUILD_DIR:-$ROOT/build-gpu}"
mkdir -p "$LOGDIR"
cd "$ROOT"
status=0
summary() { echo "$1" | tee -a "$LOGDIR/summary.txt"; }

{ date -u; git rev-parse HEAD 2>/dev/null || echo "(not a git checkout)"; nvidia-smi; nvcc --version; } \
    > "$LOGDIR/device.txt" 2>&1
summary "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
summary "commit: $(git rev-parse --short HEAD 2>/dev/null)  date: $(date -u +%FT%TZ)"

build() {
    export PATH="/usr/local/cuda/bin:$PATH"
    if [ -n "${AMPGRAD_DEBS:-}" ]; then
        eval "$(bash scripts/offline_deps.sh env "$AMPGRAD_DEBS")"
        local how=(--buildtype=release)
        [ -f "$BUILD/build.ninja" ] && how=(--reconfigure)
        meson setup "$BUILD" "${how[@]}" -Dcuda=enabled && ninja -C "$BUILD"
    else
        AMPGRAD_BUILD_DIR="$BUILD" AMPGRAD_MESON_ARGS="-Dcuda=enabled" bash scripts/setup.sh
    fi
}
start=$(date +%s)
if build > "$LOGDIR/build.log" 2>&1; then
    summary "build: ok in $(( $(date +%s) - start )) s"
else
    summary "build: FAILED (see build.log)"; echo "logs: $LOGDIR"; exit 1
fi

run_step() {   # run_step NAME COMMAND...
    local name=$1; shift
    local t0; t0=$(date +%s)
    if "$@" > "$LOGDIR/$name.log" 2>&1; then
        summary "$name: ok in $(( $(date +%s) - t0 )) s"
    else
        summary "$name: FAILED in $(( $(date +%s) - t0 )) s (see $name.log)"; status=1
    fi
}
run_step cuda meson test -C "$BUILD" --suite cuda --no-rebuild --print-errorlogs -v
grep -E "test cases:|assertions:" "$LOGDIR/cuda.log" | tail -2 | tee -a "$LOGDIR/summary.txt"
skipped=$(grep "test cases:" "$LOGDIR/cuda.log" | tail -1 | sed -n 's/.*| *\([0-9]*\) skipped.*/\1/p')
if [ "${skipped:-0}" != "0" ]; then
    summary "cuda: WARNING: $skipped cases skipped (no usable GPU?)"; status=1
fi
run_step dist meson test -C "$BUILD" --suite dist --no-rebuild --print-errorlogs
if command -v compute-sanitizer > /dev/null || [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
    run_step memcheck env AMPGRAD_FIXTURES="$ROOT/tests/fixtures" \
        compute-sanitizer --tool memcheck --error-exitcode 1 "$BUILD/tests/test_cuda"
else
    summary "memcheck: not run (no compute-sanitizer on this machine)"
fi
echo "logs: $LOGDIR"
exit $status
