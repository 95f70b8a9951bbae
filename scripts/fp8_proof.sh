#!/bin/sh
# fp8_proof.sh: issue 38's proof run (docs/fp8.md §11): `ampgrad train --prec fp8` against bf16 on the
# `small` presets (GPT `small`, Llama `llama-small`), alone and with --zero 2, on the CPU; prints each
# run's last validation loss. Two runs at a time, one thread each (OMP_NUM_THREADS=1 unless set).
#   scripts/fp8_proof.sh [BUILD_DIR] [STEPS] [OUT_DIR] [GPT_PRESET] [LLAMA_PRESET]
#   (defaults: build 500 runs/fp8_proof small llama-small)
set -eu
build=${1:-build}
steps=${2:-500}
out=${3:-runs/fp8_proof}
gpt_preset=${4:-small}
llama_preset=${5:-llama-small}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
common="--steps $steps --eval-every $steps --eval-iters 20 --sample-tokens 0 --progress plain --log-every 50"
run() {   # NAME ARGS...
    name=$1; shift
    "$build/app/ampgrad" train $common --out "$out/$name" "$@" > "$out/$name.log" 2>&1
    loss=$(grep '"kind":"eval"' "$out/$name/metrics.jsonl" | tail -1 | sed 's/.*"val_loss":\([0-9.e+-]*\).*/\1/')
    echo "$name val_loss $loss"
}
mkdir -p "$out"
run gpt_bf16 --model gpt --preset "$gpt_preset" --prec bf16 &
run gpt_fp8 --model gpt --preset "$gpt_preset" --prec fp8 --fp8-recipe delayed &
wait
run llama_bf16 --model llama --preset "$llama_preset" --prec bf16 &
run llama_fp8 --model llama --preset "$llama_preset" --prec fp8 --fp8-recipe delayed &
wait
run gpt_fp8_zero2 --model gpt --preset "$gpt_preset" --prec fp8 --fp8-recipe delayed --zero 2 &
run llama_fp8_zero2 --model llama --preset "$llama_preset" --prec fp8 --fp8-recipe delayed --zero 2 &
wait
