#!/usr/bin/env bash
# run_example.sh: README command 1. Sets up and builds (scripts/setup.sh), then runs the main
# job, examples/train_mlp: a small MLP trained on the CPU on a synthetic two-spirals dataset.
# Arguments are passed to train_mlp (try --help).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

echo "== examples/train_mlp"
exec "$AMPGRAD_BUILD_DIR/examples/train_mlp" "$@"
