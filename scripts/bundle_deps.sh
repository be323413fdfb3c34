#!/usr/bin/env bash
# Copies the build dependencies that come from Debian's -dev packages (headers, static
# libraries, CMake package files) into one folder, for a machine that has a compiler and torch
# but no package registry (the GPU machine): build there with TITAN_DEPS_PREFIX=<folder>.
set -euo pipefail
OUT=${1:-build-deps}
rm -rf "$OUT" && mkdir -p "$OUT/include" "$OUT/lib/x86_64-linux-gnu/cmake"
ML=/usr/lib/x86_64-linux-gnu
cp -r /usr/include/toml++ /usr/include/nlohmann /usr/include/gtest /usr/include/gmock "$OUT/include/"
cp /usr/include/pcre2.h /usr/include/utf8proc.h /usr/include/zlib.h /usr/include/zconf.h \
   /usr/include/zstd.h /usr/include/zstd_errors.h "$OUT/include/"
cp -r /usr/include/gloo "$OUT/include/"
cp "$ML"/libpcre2-8.a "$ML"/libutf8proc.a "$ML"/libgtest.a "$ML"/libgtest_main.a \
   "$ML"/libgmock.a "$ML"/libgmock_main.a "$OUT/lib/x86_64-linux-gnu/"
cp "$ML"/libpcre2-8.a "$ML"/libutf8proc.a "$ML"/libz.a "$ML"/libzstd.a "$OUT/lib/"
# Debian's layout, so that GTest's package files find their libraries relative to themselves.
cp -r "$ML/cmake/GTest" "$OUT/lib/x86_64-linux-gnu/cmake/"
du -sh "$OUT"
