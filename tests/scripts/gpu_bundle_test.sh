#!/usr/bin/env bash
# gpu_bundle_test.sh: scripts/gpu/bundle.sh finds the source tree from the build folder's
# meson-info.json, so a build folder outside the checkout bundles too (it used to fall back to the
# build folder's parent and fail with "cp: cannot stat '<parent>/tests/fixtures'"). The build is a
# stand-in: a meson-info.json naming this checkout and a libampgrad.so linked against libcudart (the
# mark bundle.sh checks), so the test needs the CUDA toolkit's libraries but no GPU and no CUDA build.
# It also checks that a bundle over BUNDLE_LIMIT_MIB is refused.
# Usage: gpu_bundle_test.sh SOURCE_ROOT
set -euo pipefail
SRC=$(cd "${1:?usage: gpu_bundle_test.sh SOURCE_ROOT}" && pwd)
CUDA_LIB=/usr/local/cuda/lib64
if [ ! -e "$CUDA_LIB/libcudart.so" ]; then echo "SKIP: no CUDA toolkit at /usr/local/cuda"; exit 77; fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
BUILD="$WORK/elsewhere/build"          # not inside the checkout, and its parent has no tests/
mkdir -p "$BUILD/meson-info" "$BUILD/app"
printf '{"directories": {"source": "%s", "build": "%s", "info": "%s/meson-info"}}\n' "$SRC" "$BUILD" "$BUILD" \
    > "$BUILD/meson-info/meson-info.json"
echo 'int ampgrad_stand_in(void) { return 0; }' > "$WORK/stub.c"
gcc -shared -fPIC -o "$BUILD/libampgrad.so" "$WORK/stub.c" -Wl,--no-as-needed -L"$CUDA_LIB" -lcudart
bash "$SRC/scripts/gpu/bundle.sh" "$BUILD" "$WORK/bundle" > "$WORK/log" 2>&1 || { cat "$WORK/log"; exit 1; }
[ -d "$WORK/bundle/tests/fixtures/bpe" ] || { echo "FAIL: the bundle has no tests/fixtures"; cat "$WORK/log"; exit 1; }
[ -f "$WORK/bundle/run.sh" ] && [ -f "$WORK/bundle/determinism.sh" ] && [ -f "$WORK/bundle/BUILD_INFO" ] ||
    { echo "FAIL: run.sh, determinism.sh or BUILD_INFO missing"; exit 1; }
# A bundle over the size a lent GPU carries is refused, naming its largest parts (here with a limit of 0).
if BUNDLE_LIMIT_MIB=0 bash "$SRC/scripts/gpu/bundle.sh" "$BUILD" "$WORK/bundle3" > "$WORK/log3" 2>&1; then
    echo "FAIL: a bundle over BUNDLE_LIMIT_MIB was accepted"; cat "$WORK/log3"; exit 1
fi
grep -c "over 0 MiB, more than a lent GPU carries" "$WORK/log3" > /dev/null || { echo "FAIL: no size message"; cat "$WORK/log3"; exit 1; }
# A build folder whose meson-info.json is unreadable is refused with a message, not bundled half.
echo '{' > "$BUILD/meson-info/meson-info.json"
if bash "$SRC/scripts/gpu/bundle.sh" "$BUILD" "$WORK/bundle2" > "$WORK/log2" 2>&1; then
    echo "FAIL: a corrupt meson-info.json was accepted"; exit 1
fi
grep -c "cannot read the source folder" "$WORK/log2" > /dev/null || { echo "FAIL: no message"; cat "$WORK/log2"; exit 1; }
echo "PASS: bundled from an out-of-tree build folder ($BUILD)"
