#!/usr/bin/env bash
# run.sh [STEP...]: run a bundle made by scripts/gpu/bundle.sh on a machine with an NVIDIA GPU (the
# project's copy of the workplace's GPU scripts; docs/cuda.md, "Running on a GPU"). Writes one log per
# step and summary.txt into $OUT (else into logs/ beside this script), at most 8 files.
# Steps (default: env cuda gpt2 memcheck):
#   env       nvidia-smi, the bundle's BUILD_INFO, and a check that every library resolves (fails fast)
#   cuda      tests/test_cuda: every CUDA kernel against the CPU one, gradcheck, GPT parity, zero-sync
#             step (doctest; pass doctest flags in CUDA_ARGS, e.g. CUDA_ARGS='-tc=*attention*')
#   gpt2      app/ampgrad train --device cuda --preset gpt2 --tokenizer gpt2 (the 50257-token BPE, built in:
#             without it the corpus's characters would shrink the vocabulary to 65), bf16 then fp16,
#             GPT2_STEPS steps (default 30)
#   peer      the GPU race (bench/gpu_race.py): ampgrad's bench_gpt_step and the PyTorch peer alternately,
#             GPT-2 124M bf16 and fp16, then torch.compile; race.jsonl beside the logs (PEER_ARGS, default
#             "--rounds 1" to fit the GPU minutes, replaces the flags)
#   memcheck  compute-sanitizer --tool memcheck over test_cuda, every kernel case but the GPT trainings
#             (tens of steps each: minutes under the sanitizer), the f64 gradcheck (one forward and
#             backward per output element: ~20k launches) and the native pool's own counters;
#             MEMCHECK_ARGS replaces that filter. It runs on CUDA's stream-ordered allocator
#             (AMPGRAD_CUDA_ALLOC_CONF=backend:cudaMallocAsync), whose allocations the sanitizer sees one
#             by one: inside the native pool's 2 and 20 MiB segments a read past one tensor into its
#             neighbour would go unreported (PyTorch's advice is the same: PYTORCH_NO_CUDA_MEMORY_CACHING).
#   racecheck compute-sanitizer --tool racecheck, then --tool synccheck, over the test_cuda cases of the
#             kernels with shared memory (attention.cu, rows.cuh's softmax / layer_norm / rms_norm /
#             cross_entropy, optim.cu's reductions; "?" stands for the space in the case names, which
#             the unquoted flag cannot hold); RACECHECK_ARGS replaces that filter
#   dist      tests/test_dist (process groups; NCCL where built)
#   det       determinism.sh: `train --device cuda --deterministic` across world sizes {1, 2, 4} and ZeRO
#             0-3, each run compared bit for bit by `ampgrad verify`, then the mode's cost (issue 35;
#             DET_PRECS, default "fp32 bf16 fp16-master")
#   cmd       bash -c "$RUN_CMD" inside the bundle, for anything else
# Each step has a time limit (STEP_TIMEOUT, default 240 s) so that one hang cannot eat the scarce GPU time.
# Exit status 1 if any step failed, timed out, or (cuda, memcheck, dist) passed no test case at all. A
# machine whose driver is older than the CUDA 13 runtime shows no device, and every CUDA case skips
# itself: AMPGRAD_EXPECT_GPU=1 makes test_cuda fail then, naming cudaGetDeviceCount's error.
set -uo pipefail
H=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
L=${OUT:-$H/logs}; mkdir -p "$L" && L=$(cd "$L" && pwd)   # absolute: some steps change directory
T=${STEP_TIMEOUT:-240}
steps=("$@"); [ ${#steps[@]} -gt 0 ] || steps=(env cuda gpt2 memcheck)
say() { echo "$*" | tee -a "$L/summary.txt"; }

# The bundle's own libraries travel packed (bundle.sh); they are unpacked outside the bundle, so that a
# rehearsal here leaves it small enough to carry.
D=${TMPDIR:-/tmp}/ampgrad-bundle-deps-$(cksum < "$H/deps.tar.gz" | cut -d' ' -f1)
[ -d "$D/deps" ] || { mkdir -p "$D" && tar -C "$D" -xzf "$H/deps.tar.gz"; }

# The CUDA 13 and NCCL libraries: wherever this machine keeps them (toolkit, or pip's nvidia-* wheels).
libdirs=$D/deps
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libnccl.so.2; do
    d=$(ldconfig -p 2>/dev/null | awk -v l="$lib" '$1 == l {print $NF; exit}' | xargs -r dirname)
    [ -n "$d" ] || d=$(find /usr/local/cuda/lib64 /usr/local/cuda/targets /usr/lib /opt /usr/local/lib \
                        -name "$lib" -print -quit 2>/dev/null | xargs -r dirname)
    [ -n "$d" ] && case ":$libdirs:" in *":$d:"*) ;; *) libdirs=$libdirs:$d ;; esac
done
export LD_LIBRARY_PATH=$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# AMPGRAD_BUILD_ROOT: where tests/dist spawns its workers from ($H/tests/dist_worker, $H/tools/ampgrad-run).
export AMPGRAD_FIXTURES=$H/tests/fixtures AMPGRAD_BUILD_ROOT=$H PATH=/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1
export AMPGRAD_EXPECT_GPU=1   # test_cuda fails (tests/cuda/backend_test.cpp) instead of skipping every case
status=0
step() {   # step NAME COMMAND...: run with the time limit, log to NAME.log, one summary line
    local name=$1; shift; local t0=$SECONDS rc
    timeout -k 10 "$T" "$@" > "$L/$name.log" 2>&1; rc=$?
    if [ $rc -eq 0 ]; then say "$name: ok in $((SECONDS - t0)) s"
    elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then say "$name: TIMED OUT after $T s (see $name.log)"; status=1
    else say "$name: FAILED, exit $rc, in $((SECONDS - t0)) s (see $name.log)"; status=1; fi
}
in_dir() { pushd "$1" > /dev/null && shift && "$@"; popd > /dev/null; }   # in_dir DIR step ...: keeps status
# ran_cases NAME: fails the run when the doctest program in NAME.log passed no test case (all skipped).
ran_cases() {
    if ! grep -qE "^\[doctest\] test cases: *[0-9]+ *\| *[1-9][0-9]* passed" "$L/$1.log"; then
        say "$1: NO TEST CASE PASSED (no usable GPU? see env.log: driver, CUDA version)"; status=1
    fi
}
for s in "${steps[@]}"; do case $s in
  env)
    { date -u; cat "$H/BUILD_INFO"; nvidia-smi; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH";
      for e in "$H/libampgrad.so" "$H/tests/test_cuda" "$H/app/ampgrad"; do echo "== ldd $e"; ldd "$e"; done; } > "$L/env.log" 2>&1
    say "device: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)"
    say "$(grep commit "$H/BUILD_INFO")"
    say "driver's CUDA: $(nvidia-smi 2>/dev/null | grep -o 'CUDA Version: *[0-9.]*' | head -1) (the bundle needs 13.0 or later)"
    # "=> not found" (a missing library) and "version `GLIBCXX_3.4.30' not found" (too old a libstdc++)
    if grep -qE "=> not found|version .* not found" "$L/env.log"; then
        say "env: MISSING LIBRARIES: $(grep -E "=> not found|version .* not found" "$L/env.log" | sort -u | tr -s ' \t' ' ' | tr '\n' ';')"; exit 1
    fi ;;
  cuda)
    step cuda "$H/tests/test_cuda" ${CUDA_ARGS:-}
    grep -E "^\[doctest\] (test cases|assertions)" "$L/cuda.log" | tee -a "$L/summary.txt"
    ran_cases cuda
    grep -m 20 -E "ERROR|FATAL|error:|SIGSEGV|what\(\)" "$L/cuda.log" | cut -c1-220 | tee -a "$L/summary.txt" ;;
  gpt2)
    for prec in bf16 fp16; do
      step "gpt2_$prec" "$H/app/ampgrad" train --device cuda --preset gpt2 --tokenizer gpt2 --prec "$prec" \
           --steps "${GPT2_STEPS:-30}" --batch-size "${GPT2_BATCH:-8}" --eval-every 100000 --sample-tokens 0 \
           --progress plain --log-every 5 --out "/tmp/ampgrad-gpt2-$prec"
      # the last progress lines (their tok/s is over the last --log-every steps), and any error
      { grep -E "^ *step .*tok/s" "$L/gpt2_$prec.log" | tail -2; grep -m 3 -E "error|Error" "$L/gpt2_$prec.log"; } |
          cut -c1-200 | tee -a "$L/summary.txt"
    done ;;
  peer)
    in_dir "$H/bench" step peer python3 gpu_race.py --ampgrad "$H/bench/bench_gpt_step" --json "$L/race.jsonl" ${PEER_ARGS:---rounds 1}
    grep -vE "^#" "$L/peer.log" | tail -8 | tee -a "$L/summary.txt" ;;
  memcheck)
    if command -v compute-sanitizer >/dev/null; then
      AMPGRAD_CUDA_ALLOC_CONF=backend:cudaMallocAsync step memcheck compute-sanitizer --tool memcheck --error-exitcode 1 \
           "$H/tests/test_cuda" ${MEMCHECK_ARGS:--tce=GPT*,float64?gradcheck*,*record_stream}
      ran_cases memcheck
      grep -m 10 -E "ERROR SUMMARY|Invalid|out of bounds|misaligned" "$L/memcheck.log" | cut -c1-220 | tee -a "$L/summary.txt"
    else say "memcheck: no compute-sanitizer here"; fi ;;
  racecheck)
    if command -v compute-sanitizer >/dev/null; then
      for tool in racecheck synccheck; do
        step "$tool" compute-sanitizer --tool "$tool" --error-exitcode 1 "$H/tests/test_cuda" \
             ${RACECHECK_ARGS:--tc=cuda?attention*,cuda?softmax*,cuda?layer_norm*,cuda?cross_entropy*,cuda?F::rms_norm*,cuda?adam_step*,cuda?sgd_step*}
        ran_cases "$tool"
        grep -m 10 -E "ERROR SUMMARY|hazard|Race|Barrier|divergent" "$L/$tool.log" | cut -c1-220 | tee -a "$L/summary.txt"
      done
    else say "racecheck: no compute-sanitizer here"; fi ;;
  dist)
    in_dir "$H/tests" step dist "$H/tests/test_dist"
    grep -E "^\[doctest\] test cases" "$L/dist.log" | tee -a "$L/summary.txt"
    ran_cases dist ;;
  det)
    in_dir "$H" step det bash "$H/determinism.sh" "$H"
    grep -E "^det:|^cost|DIFFERS|FAILED" "$L/det.log" | head -12 | cut -c1-220 | tee -a "$L/summary.txt" ;;
  cmd)
    [ -n "${RUN_CMD:-}" ] || { say "cmd: set RUN_CMD"; status=1; continue; }
    in_dir "$H" step cmd bash -c "$RUN_CMD" ;;
  *) say "unknown step $s"; status=1 ;;
esac; done
exit $status
