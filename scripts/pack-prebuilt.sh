#!/usr/bin/env bash
# Packs a build for a GPU machine that has the NVIDIA driver and the CUDA toolkit but not Debian's
# packages (another distribution, no network): the executables of the tests and benchmarks, ctest's
# files, the shared libraries they load that are not the C library's (oneDNN, fmt, OpenCL, utf8proc,
# libgomp; libstdc++ apart, used only where that machine's is older), Chart.js, and with --with-shared
# ../shared's SST-2 data and model; with --tests REGEX only the test executables of the tests that
# `ctest -R REGEX` runs (the bundle must fit where it travels: the whole build is ~150 MB, ~23 MB packed).
# On that machine, in a checkout of the same commit:
#   source scripts/unpack-prebuilt.sh BUNDLE      # build/release, ../shared, LD_LIBRARY_PATH, QJOULE_CHARTJS
#   bash scripts/gpu-acceptance.sh OUT_DIR --prebuilt build/release
# usage: scripts/pack-prebuilt.sh BUNDLE.tar.xz [--build-dir DIR] [--with-shared] [--tests REGEX]
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { echo "usage: scripts/pack-prebuilt.sh BUNDLE.tar.xz [--build-dir DIR] [--with-shared] [--tests REGEX]" >&2; exit 2; }
[ $# -ge 1 ] || usage
bundle=$(realpath -m "$1")
shift
build=build/release
with_shared=0
tests=""
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || usage; build="$2"; shift 2 ;;
    --with-shared) with_shared=1; shift ;;
    --tests) [ $# -ge 2 ] || usage; tests="$2"; shift 2 ;;
    *) usage ;;
  esac
done
# QJOULE_PACK_XZ_PRESET (0-9, optionally with e; default 9e, the smallest bundle): the test suite packs
# with 0, which takes seconds instead of minutes.
preset=${QJOULE_PACK_XZ_PRESET:-9e}
[[ "$preset" =~ ^[0-9]e?$ ]] || { echo "pack-prebuilt: QJOULE_PACK_XZ_PRESET='$preset': expected 0-9, optionally followed by e" >&2; exit 2; }
[ -x "$build/src/cli/qjoule" ] || { echo "pack-prebuilt: no $build/src/cli/qjoule: build first (scripts/build.sh release)" >&2; exit 1; }
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/$build" "$stage/prebuilt/lib" "$stage/prebuilt/cxx"
# ctest's files and every executable or shared object of the build (not the object files).
(cd "$build" && find . -path ./CMakeFiles -prune -o \( -name CTestTestfile.cmake -o -name '*_tests.cmake' \
   -o -name '*_include.cmake' -o \( -type f \( -perm -u+x -o -name '*.so' \) -not -path '*/CMakeFiles/*' \) \) -print0 \
   | tar --null -T - -cf - | tar -xf - -C "$stage/$build")
if [ -n "$tests" ]; then
  # Keep the executables of the tests REGEX selects, qjoule and microbench/; drop the other tests'.
  keep=$(ctest --test-dir "$build" --show-only=json-v1 -R "$tests" | python3 -c '
import json, os, sys
root = os.path.realpath(sys.argv[1])
for t in json.load(sys.stdin).get("tests", []):
    exe = os.path.realpath(t["command"][0])
    if exe.startswith(root + "/"): print(os.path.relpath(exe, root))' "$build" | sort -u)
  [ -n "$keep" ] || { echo "pack-prebuilt: --tests '$tests': ctest lists no test of $build that matches" >&2; exit 1; }
  (cd "$stage/$build" && find tests -type f -perm -u+x -not -name '*.sh' -not -name '*.py' -not -name '*.so' -not -name '*.so.*' -print) | while read -r exe; do
    grep -qxF "$exe" <<< "$keep" || rm -f "$stage/$build/$exe"
  done
fi
# The libraries the binaries load, from this machine, except the C library's own and the CUDA driver's.
{ ldd "$build/src/cli/qjoule" "$build"/tests/kernels/cpu/* 2>/dev/null || true; } | awk '/=> \//{print $3}' | sort -u |
  while read -r lib; do
    case "$(basename "$lib")" in
      libc.so.*|libm.so.*|libdl.so.*|librt.so.*|libpthread.so.*|ld-linux*|libcuda.so.*) ;;
      libstdc++.so.*|libgcc_s.so.*) cp -L "$lib" "$stage/prebuilt/cxx/" ;;
      *) cp -L "$lib" "$stage/prebuilt/lib/" ;;
    esac
  done
strip --strip-unneeded "$stage"/prebuilt/lib/* 2>/dev/null || true
chart=${QJOULE_CHARTJS:-/usr/share/javascript/chart.js/chart.min.js}
[ -f "$chart" ] && cp "$chart" "$stage/prebuilt/chart.min.js"
pwd > "$stage/prebuilt/source-dir.txt"
if [ "$with_shared" = 1 ]; then
  shared=../shared/data
  [ -d "$shared" ] || { echo "pack-prebuilt: --with-shared: no $shared beside the checkout" >&2; exit 1; }
  mkdir -p "$stage/prebuilt/shared/data/sst2" "$stage/prebuilt/shared/data/models"
  cp "$shared/sst2/dev.tsv" "$stage/prebuilt/shared/data/sst2/"
  cp -r "$shared/models/sst2-distilbert-mini" "$stage/prebuilt/shared/data/models/"
fi
(cd "$stage" && tar -cf - . | xz -T0 "-$preset" > "$bundle")
echo "pack-prebuilt: wrote $bundle ($(du -h "$bundle" | cut -f1)); on the GPU machine: source scripts/unpack-prebuilt.sh $(basename "$bundle")"
