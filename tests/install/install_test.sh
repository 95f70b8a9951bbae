#!/usr/bin/env bash
# install_test.sh BUILD_DIR PROG_CPP SANITIZE: `meson install` BUILD_DIR into a temporary prefix,
# then build prog.cpp the way a user would, `c++ -std=c++20 prog.cpp $(pkg-config --cflags
# --libs ampgrad)`, and run it. Skipped (exit 77) for sanitizer builds, whose library needs the
# sanitizer runtime preloaded into an uninstrumented program.
set -euo pipefail
build_dir="$1" prog="$2" sanitize="${3:-none}"
if [ "$sanitize" != "none" ]; then echo "install test skipped: b_sanitize=$sanitize"; exit 77; fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
meson install -C "$build_dir" --destdir "$tmp/root" --no-rebuild --quiet

# The .pc file was written for the configured prefix; relocate it to where the files now lie,
# as if ampgrad had been configured with --prefix=$tmp/root/<prefix>.
pc="$(find "$tmp/root" -name ampgrad.pc | head -n 1)"
[ -n "$pc" ] || { echo "install test: no ampgrad.pc was installed" >&2; exit 1; }
prefix="$(sed -n 's/^prefix=//p' "$pc")"
mkdir -p "$tmp/pkgconfig"
sed "s|^prefix=.*|prefix=$tmp/root$prefix|" "$pc" > "$tmp/pkgconfig/ampgrad.pc"
export PKG_CONFIG_PATH="$tmp/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"

flags="$(pkg-config --cflags --libs ampgrad)"
echo "pkg-config --cflags --libs ampgrad: $flags"
# shellcheck disable=SC2086  # the flags must split into words
c++ -std=c++20 "$prog" $flags -o "$tmp/prog"
LD_LIBRARY_PATH="$(pkg-config --variable=libdir ampgrad)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$tmp/prog"
