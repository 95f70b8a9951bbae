#!/usr/bin/env bash
# setup.sh: the shared first step of scripts/run_example.sh and scripts/run_tests.sh.
# On Debian 12 (as root) it apt-installs whatever build dependency is missing, decides whether to
# compile the CUDA backend (only where it can run: a GPU is found, or AMPGRAD_CUDA=1 or
# -Dcuda=enabled asks for it, as .ci/run and the GPU bundle do; else -Dcuda=disabled), then
# configures a release build in $AMPGRAD_BUILD_DIR (default: build/) and builds
# $AMPGRAD_BUILD_TARGETS (default: everything; run_example.sh asks for the `ampgrad` command only).
# It also prepares the Python used by the interop tests: a venv in $AMPGRAD_BUILD_DIR/python-venv made
# from Debian's python3 (with python3-numpy from Debian via --system-site-packages) plus the
# `safetensors` and `tensorboard` packages from PyPI (tests/io's safetensors interop test, and
# tests/app's TensorBoard test, which reads --tensorboard's files with TensorBoard's own reader; the
# library never uses either), and exports AMPGRAD_PYTHON.
# Knobs: AMPGRAD_BUILD_DIR, AMPGRAD_MESON_ARGS (extra `meson setup` arguments, e.g. -Dcuda=enabled),
# AMPGRAD_CUDA (1: compile CUDA without a GPU; 0: never), AMPGRAD_BUILD_TARGETS (ninja targets),
# AMPGRAD_PYTHON (an interpreter that already has numpy, safetensors and tensorboard: no venv is made).
set -euo pipefail

AMPGRAD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
AMPGRAD_BUILD_DIR="${AMPGRAD_BUILD_DIR:-build}"
case "$AMPGRAD_BUILD_DIR" in /*) ;; *) AMPGRAD_BUILD_DIR="$AMPGRAD_ROOT/$AMPGRAD_BUILD_DIR" ;; esac
export AMPGRAD_ROOT AMPGRAD_BUILD_DIR

# Debian package names (checked with apt-cache on Debian 12 "bookworm").
AMPGRAD_PACKAGES=(meson ninja-build g++ pkg-config libeigen3-dev doctest-dev libfmt-dev
                  nlohmann-json3-dev libcli11-dev gnuplot-nox python3
                  cmake libgloo-dev    # cmake: Meson finds Debian's Gloo through its CMake files
                  python3-numpy python3-venv    # tests/io's interop test (see prepare_test_python)
                  libdnnl-dev                   # oneDNN: the CPU GEMM for f32 and bf16 (Eigen without it)
                  libssl-dev                    # libcrypto's SHA-256: data prepare's meta.json
                  libprotobuf-dev protobuf-compiler)   # TensorBoard event files (io/tensorboard/, protoc in meson)

install_missing_packages() {
    local missing=() p
    for p in "${AMPGRAD_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -c "install ok installed" > /dev/null || missing+=("$p")
    done
    if [ "${#missing[@]}" -eq 0 ]; then
        echo "setup: all ${#AMPGRAD_PACKAGES[@]} packages already installed"
        return
    fi
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null || { echo "setup: missing packages (${missing[*]}); run as root" >&2; exit 1; }
        sudo="sudo"
    fi
    echo "setup: installing ${missing[*]}"
    $sudo apt-get update
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y --no-install-recommends "${missing[@]}"
}

# CUDA is compiled only where it can run or is asked for: about 50 kernels' worth of nvcc time
# that a machine without a GPU never uses. AMPGRAD_CUDA_FLAG is the `meson setup` flag it decided.
choose_cuda() {
    AMPGRAD_CUDA_FLAG=()
    case " ${AMPGRAD_MESON_ARGS:-} " in *" -Dcuda="*) ;; *)
        local want="${AMPGRAD_CUDA:-auto}"
        if [ "$want" = auto ]; then
            want=0
            command -v nvidia-smi >/dev/null && nvidia-smi -L 2>/dev/null | grep -q '^GPU' && want=1
        fi
        if [ "$want" = 1 ]; then AMPGRAD_CUDA_FLAG=(-Dcuda=auto); else AMPGRAD_CUDA_FLAG=(-Dcuda=disabled); fi ;;
    esac
    if [ "${AMPGRAD_CUDA_FLAG[*]:-}" = "-Dcuda=disabled" ]; then
        echo "setup: no GPU found: CPU-only build (AMPGRAD_CUDA=1 or AMPGRAD_MESON_ARGS=-Dcuda=enabled compiles CUDA)"
    elif [ -x /usr/local/cuda/bin/nvcc ]; then
        export PATH="/usr/local/cuda/bin:$PATH"
        echo "setup: CUDA toolkit found at /usr/local/cuda (nvcc on PATH): the CUDA backend is compiled"
    else
        echo "setup: no CUDA toolkit at /usr/local/cuda: CPU-only build"
    fi
}

# Configure once (reconfigure later: tests/meson.build discovers test files at setup time), then build.
configure_and_build() {
    local extra=()
    read -r -a extra <<< "${AMPGRAD_MESON_ARGS:-}"
    command -v ccache >/dev/null && export CXX="${CXX:-ccache g++}"
    cd "$AMPGRAD_ROOT"
    local how=(--buildtype=release)
    [ -f "$AMPGRAD_BUILD_DIR/build.ninja" ] && how=(--reconfigure)
    mkdir -p "$AMPGRAD_BUILD_DIR"
    meson setup "$AMPGRAD_BUILD_DIR" "${how[@]}" "${AMPGRAD_CUDA_FLAG[@]}" "${extra[@]}" \
        > "$AMPGRAD_BUILD_DIR/setup.log" 2>&1 || { cat "$AMPGRAD_BUILD_DIR/setup.log"; exit 1; }
    local targets=()
    read -r -a targets <<< "${AMPGRAD_BUILD_TARGETS:-}"
    echo "setup: building ${targets[*]:-everything} in $AMPGRAD_BUILD_DIR ($(nproc) jobs)"
    ninja -C "$AMPGRAD_BUILD_DIR" -j "$(nproc)" "${targets[@]}"
}

# The interop test's interpreter. Debian 12's python is "externally managed" (PEP 668), so the
# PyPI package goes into a venv; --system-site-packages lets it use Debian's numpy. A failure
# here is reported but does not stop the build: the interop test then fails, saying why.
TEST_PYTHON_IMPORTS='import numpy, safetensors, tensorboard'
prepare_test_python() {
    if [ -n "${AMPGRAD_PYTHON:-}" ] && "$AMPGRAD_PYTHON" -c "$TEST_PYTHON_IMPORTS" 2>/dev/null; then
        echo "setup: test python $AMPGRAD_PYTHON has numpy, safetensors and tensorboard"
        export AMPGRAD_PYTHON
        return
    fi
    local base=/usr/bin/python3 venv="$AMPGRAD_BUILD_DIR/python-venv"
    [ -x "$base" ] || base="$(command -v python3)"
    if ! "$venv/bin/python3" -c "$TEST_PYTHON_IMPORTS" 2>/dev/null; then
        echo "setup: making $venv (numpy from Debian, safetensors and tensorboard from PyPI)"
        mkdir -p "$AMPGRAD_BUILD_DIR"
        "$base" -m venv --system-site-packages "$venv" &&
            "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check safetensors tensorboard ||
            echo "setup: WARNING: could not install safetensors and tensorboard into $venv; the interop tests will fail" >&2
    fi
    export AMPGRAD_PYTHON="$venv/bin/python3"
    echo "setup: test python $AMPGRAD_PYTHON"
}

install_missing_packages
choose_cuda
prepare_test_python
configure_and_build
