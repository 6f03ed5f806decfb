#!/usr/bin/env bash
# Configures and builds one flavour of qjoule with CMake + Ninja.
#   scripts/build.sh release   -> build/release (warnings are errors)
#   scripts/build.sh asan      -> build/asan    (AddressSanitizer + UndefinedBehaviorSanitizer; without the
#                                               CUDA backend, so that CI builds both configurations)
set -euo pipefail
cd "$(dirname "$0")/.."
flavour="${1:-release}"
case "$flavour" in
  release) args=(-DCMAKE_BUILD_TYPE=Release -DQJOULE_WERROR=ON) ;;
  asan)    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DQJOULE_WERROR=ON -DQJOULE_SANITIZE=ON -DQJOULE_BUILD_BENCH=OFF -DQJOULE_BUILD_PYTHON=OFF
          -DQJOULE_CUDA=OFF) ;;
  debug)   args=(-DCMAKE_BUILD_TYPE=Debug) ;;
  *) echo "build.sh: unknown flavour '$flavour' (expected release, asan or debug)" >&2; exit 2 ;;
esac
cmake -S . -B "build/$flavour" -G Ninja "${args[@]}" >/dev/null
cmake --build "build/$flavour" -j "$(nproc)"
