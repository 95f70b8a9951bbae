#!/usr/bin/env bash
# run_tests.sh: README command 2. Sets up and builds (scripts/setup.sh), then runs every test
# suite that needs no GPU (`meson test --suite cpu`). Meson closes with its "Ok: N  Fail: N"
# block; scripts/test_summary.py then adds the doctest case counts and a last line
# "N passed, N failed". Exits non-zero if anything failed. Arguments go to `meson test`.
set -euo pipefail
tests_ran=0
# A failed set-up or build still ends with the closing line (counted as one failure).
trap 'status=$?; if [ "$tests_ran" -eq 0 ] && [ "$status" -ne 0 ]; then echo "setup or build failed"; echo "0 passed, 1 failed"; fi' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

echo "== meson test --suite cpu ($AMPGRAD_BUILD_DIR)"
tests_ran=1
status=0
meson test -C "$AMPGRAD_BUILD_DIR" --suite cpu --print-errorlogs "$@" || status=$?
python3 "$AMPGRAD_ROOT/scripts/test_summary.py" "$AMPGRAD_BUILD_DIR/meson-logs/testlog.json" || status=1
exit "$status"
