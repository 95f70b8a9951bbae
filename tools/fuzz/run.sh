#!/usr/bin/env bash
# run.sh: build the safetensors reader's fuzz target with clang (libFuzzer + ASan + UBSan) and
# run it for a bounded time on a copy of the committed seed corpus. Only the format layer
# (io/safetensors_format.cpp) and the target are compiled, so this takes seconds, not minutes.
# Exits non-zero on a crash, a sanitizer report, or a build failure.
#   tools/fuzz/run.sh [seconds]        (default 60; the build dir is $AMPGRAD_FUZZ_DIR or build-fuzz/)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SECONDS_TO_RUN="${1:-60}"
OUT="${AMPGRAD_FUZZ_DIR:-$ROOT/build-fuzz}"
CXX_FUZZ="${CXX_FUZZ:-clang++}"
mkdir -p "$OUT/corpus"
cp -n "$ROOT"/tools/fuzz/corpus/* "$OUT/corpus/" 2>/dev/null || true

echo "fuzz: building $OUT/safetensors_fuzz with $CXX_FUZZ"
# FMT_HEADER_ONLY: fmt is compiled into the target, so no g++-built library is linked in.
"$CXX_FUZZ" -std=c++20 -O1 -g -fno-omit-frame-pointer \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -DFMT_HEADER_ONLY -I"$ROOT" \
    "$ROOT/io/safetensors_format.cpp" "$ROOT/tools/fuzz/safetensors_fuzz.cpp" \
    -o "$OUT/safetensors_fuzz"

echo "fuzz: running for ${SECONDS_TO_RUN}s"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
cd "$OUT"
./safetensors_fuzz -max_total_time="$SECONDS_TO_RUN" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
    -dict="$ROOT/tools/fuzz/safetensors.dict" -print_final_stats=1 -artifact_prefix="$OUT/" corpus
