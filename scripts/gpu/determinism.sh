#!/usr/bin/env bash
# determinism.sh BUNDLE_DIR: issue 35's matrix on a GPU (scripts/gpu/run.sh's `det` step; docs/determinism.md).
# The suite's check (tests/app/deterministic_run_test.cpp) with --device cuda: a two-layer GPT (dropout 0.1),
# 20 steps of AdamW, 8 micro-batches of 2 sequences x 16 tokens per step, `train --deterministic`, in every
# precision of DET_PRECS (default "fp32 bf16 fp16-master") x world size {1, 2, 4} (accumulation 8 / world)
# x ZeRO {0, 1, 2, 3}. Every run is compared with world 1 ZeRO 0 of its precision by `ampgrad verify`
# (every metric and every checkpointed tensor, bit for bit). On a machine with fewer GPUs than ranks the
# ranks share them and talk over Gloo through host copies (dist/staged_group.hpp); on one with enough,
# over NCCL. Then the cost: GPT `small` at the default and in the deterministic mode, one rank, COST_STEPS
# steps each (default 30), the median step time of each from its metrics.jsonl.
# Prints one line per run and "det: N identical, M different"; exits 1 if any run differs or fails.
# The layouts of a precision run DET_JOBS at a time (default 4).
# DET_DEVICE=cpu rehearses it on the CPU, with a build folder for BUNDLE_DIR (the same app/ and tools/).
set -uo pipefail
H=$(cd "${1:?usage: determinism.sh BUNDLE_DIR}" && pwd)
W=${TMPDIR:-/tmp}/ampgrad-det-$$
mkdir -p "$W"
identical=0 different=0
port=$((20000 + $$ % 100 * 100))   # below the ephemeral range; each layout takes the next
common=(train --device "${DET_DEVICE:-cuda}" --deterministic --steps 20 --warmup 2 --lr 3e-3 --eval-every 100 --eval-iters 1
        --sample-tokens 0 --ckpt-every 10 --progress plain --log-every 1
        --n-layer 2 --n-embd 32 --n-head 2 --block-size 16 --dropout 0.1)
run() {   # run PREC RANKS ZERO [PORT]: one layout into $W/PREC-RANKSr-zeroZERO
    local prec=$1 ranks=$2 zero=$3 port=${4:-0} out="$W/$1-$2r-zero$3" extra=()
    [ "$prec" = fp16-master ] && extra=(--init-scale 16777216 --scale-window 4 --hysteresis 1)
    local launch=("$H/app/ampgrad")
    [ "$ranks" -gt 1 ] && launch=("$H/tools/ampgrad-run" --nproc-per-node "$ranks" --master-port "$port" "$H/app/ampgrad")
    "${launch[@]}" "${common[@]}" --prec "$prec" "${extra[@]}" --zero "$zero" --batch-size $((2 * ranks)) \
        --grad-accum $((8 / ranks)) --out "$out" > "$out.log" 2>&1 || { echo "$out: FAILED (exit $?): $(tail -3 "$out.log" | tr '\n' ' ')"; return 1; }
    echo "$out"
}
# check PREC RANKS ZERO REFERENCE PORT: one layout, run and compared; its line goes to
# $W/PREC-RANKSr-zeroZERO.result.
check() {
    local prec=$1 ranks=$2 zero=$3 reference=$4 port=$5 out
    exec > "$W/$prec-${ranks}r-zero$zero.result"
    out=$(run "$prec" "$ranks" "$zero" "$port") || { echo "$out"; return; }
    if "$H/app/ampgrad" verify "$reference" "$out" > "$out.verify" 2>&1; then
        echo "$prec ${ranks}r zero$zero: identical to 1r zero0"
    else
        echo "$prec ${ranks}r zero$zero: DIFFERS: $(head -3 "$out.verify" | tr '\n' ' ')"
    fi
}
# The layouts of one precision run DET_JOBS at a time (default 4; the ranks of a layout share the GPU
# and its CPU cores): one at a time, 36 runs of process and CUDA start-up would not fit the step's time.
layouts=()   # "RANKS ZERO": every world size x stage but the reference's 1 x 0
for ranks in 1 2 4; do for zero in 0 1 2 3; do [ "$ranks$zero" = 10 ] || layouts+=("$ranks $zero"); done; done
for prec in ${DET_PRECS:-fp32 bf16 fp16-master}; do
    reference=$(run "$prec" 1 0) || { echo "$reference"; different=$((different + 1)); continue; }
    for layout in "${layouts[@]}"; do
        while [ "$(jobs -rp | wc -l)" -ge "${DET_JOBS:-4}" ]; do wait -n; done
        port=$((port + 1))   # a master port of its own for every layout in flight
        check "$prec" $layout "$reference" "$port" &
    done
    wait
    for layout in "${layouts[@]}"; do
        set -- $layout
        line=$(cat "$W/$prec-${1}r-zero$2.result" 2>/dev/null)
        echo "${line:-$prec ${1}r zero$2: FAILED (no result)}"
        case $line in *": identical to 1r zero0") identical=$((identical + 1)) ;; *) different=$((different + 1)) ;; esac
    done
done
echo "det: $identical identical, $different different or failed"
# The cost of the mode on the GPU: the median step time of a default and a deterministic run.
# From the differences of elapsed_s between steps (tokens_per_s is a running average since step 1, whose
# start-up cost would dominate it), skipping the first three, as bench/determinism_cost.py does.
median_ms() { python3 -c 'import json,statistics,sys
e=[r["elapsed_s"] for r in map(json.loads, open(sys.argv[1])) if r.get("kind") == "train"]
t=[1e3 * (b - a) for a, b in zip(e, e[1:])][3:]
print(f"{statistics.median(t):.2f}" if t else "n/a")' "$1/metrics.jsonl" 2>/dev/null || echo "n/a"; }
for mode in default deterministic; do
    flags=(--zero 0); [ "$mode" = deterministic ] && flags+=(--deterministic)
    "$H/app/ampgrad" train --device "${DET_DEVICE:-cuda}" --preset small --prec bf16 --batch-size 16 --steps "${COST_STEPS:-30}" \
        --eval-every 100000 --sample-tokens 0 --progress plain --log-every 1 "${flags[@]}" --out "$W/cost-$mode" \
        > "$W/cost-$mode.log" 2>&1 || echo "cost $mode: FAILED: $(tail -2 "$W/cost-$mode.log" | tr '\n' ' ')"
    echo "cost $mode: median step $(median_ms "$W/cost-$mode") ms (GPT small, bf16, batch 16, one rank)"
done
[ "$different" -eq 0 ]
