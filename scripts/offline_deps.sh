#!/usr/bin/env bash
# offline_deps.sh: ampgrad's build dependencies for a machine with the CUDA toolkit, a compiler, meson and
# ninja but no apt and no package registry (a lent GPU box).
#   offline_deps.sh pack DIR   (here, on Debian 12 as root) download the -dev .debs into DIR; nothing is installed
#   offline_deps.sh env DIR    (there) unpack DIR's .debs into a private root ($AMPGRAD_DEPS_ROOT, default
#                              /tmp/ampgrad-deps; never /) and print the exports that point pkg-config, the
#                              compiler and the linker at it:  eval "$(bash scripts/offline_deps.sh env DIR)"
# Gloo is left out (its CMake files hard-code /usr paths); the dist backend then builds without it.
set -euo pipefail
PACKAGES=(libeigen3-dev libfmt-dev libfmt9 nlohmann-json3-dev libcli11-dev doctest-dev
          pkgconf pkgconf-bin libpkgconf3)

pack() {
    local dir=$1
    mkdir -p "$dir"
    (cd "$dir" && apt-get download -q "${PACKAGES[@]}")
    ls -1 "$dir"
}

unpack_env() {
    local dir root=${AMPGRAD_DEPS_ROOT:-/tmp/ampgrad-deps}
    dir=$(cd "$1" && pwd)
    mkdir -p "$root"
    for deb in "$dir"/*.deb; do dpkg-deb -x "$deb" "$root"; done
    # Debian's .pc files say prefix=/usr: point them at the private root.
    find "$root" -name '*.pc' -exec sed -i "s#=/usr/#=$root/usr/#g; s#=/usr\$#=$root/usr#" {} +
    [ -e "$root/usr/bin/pkg-config" ] || ln -sf pkgconf "$root/usr/bin/pkg-config"
    echo "export PKG_CONFIG_PATH=$(find "$root" -type d -name pkgconfig | paste -sd:)"
    echo "export CPATH=$root/usr/include:$root/usr/include/eigen3"
    echo "export LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu"
    echo "export LD_LIBRARY_PATH=$root/usr/lib/x86_64-linux-gnu:\${LD_LIBRARY_PATH:-}"
    echo "export CMAKE_PREFIX_PATH=$root/usr"
    echo "export PATH=/usr/local/cuda/bin:\$PATH:$root/usr/bin"
}

case "${1:-}" in
    pack) pack "${2:?usage: offline_deps.sh pack DIR}" ;;
    env) unpack_env "${2:?usage: offline_deps.sh env DIR}" ;;
    *) echo "usage: offline_deps.sh pack DIR | env DIR" >&2; exit 2 ;;
esac
