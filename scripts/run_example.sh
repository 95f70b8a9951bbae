#!/usr/bin/env bash
# run_example.sh: README command 1. Sets up and builds (scripts/setup.sh), then trains the nano
# GPT on the bundled Tiny Shakespeare with fp16 autocast (GradScaler) on the CPU: a progress line,
# evaluations, the final eval loss and a sample; metrics.jsonl, a checkpoint and PNG plots are left
# in runs/example/ (docs/gpt.md explains each). Extra arguments go to `ampgrad train` (try --help).
# The old main job, the MLP on two spirals, is built by run_tests.sh: build/examples/train_mlp.
set -euo pipefail
# The example needs the library and the `ampgrad` command only; run_tests.sh builds the rest.
AMPGRAD_BUILD_TARGETS="${AMPGRAD_BUILD_TARGETS:-app/ampgrad}"
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

OUT="${AMPGRAD_EXAMPLE_OUT:-$AMPGRAD_ROOT/runs/example}"
echo "== ampgrad train: nano GPT, fp16 autocast, CPU; output in $OUT"
"$AMPGRAD_BUILD_DIR/app/ampgrad" train --preset nano --prec fp16 --device cpu \
    --steps 1000 --batch-size 16 --warmup 50 --lr 3e-3 --min-lr 3e-4 --eval-every 250 --eval-iters 10 \
    --out "$OUT" --plot "$OUT/plots" "$@"
echo "== done: $OUT/metrics.jsonl, $OUT/checkpoints/latest, $OUT/plots/*.png"
echo "   sample more: $AMPGRAD_BUILD_DIR/app/ampgrad sample --ckpt $OUT --prompt 'ROMEO:'"
