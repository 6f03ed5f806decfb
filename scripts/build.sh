#!/usr/bin/env bash
# Configures and builds one flavour of qjoule with CMake + Ninja: every target, or the targets named
# after the flavour (scripts/run-benchmark.sh: `build.sh release qjoule`).
#   scripts/build.sh release   -> build/release (warnings are errors; CUDA code for the GPU architectures
#                                 in QJOULE_CUDA_ARCHS, default sm_75, 80, 86, 89 and 90 + PTX 90)
#   scripts/build.sh asan      -> build/asan    (AddressSanitizer + UndefinedBehaviorSanitizer; without the
#                                               CUDA backend, so that CI builds both configurations)
#   scripts/build.sh debug     -> build/debug   (-O0 -g, every source file compiled alone: no unity batches)
set -euo pipefail
cd "$(dirname "$0")/.."
flavour="${1:-release}"
targets=("${@:2}")
case "$flavour" in
  release) args=(-DCMAKE_BUILD_TYPE=Release -DQJOULE_WERROR=ON
                 "-DCMAKE_CUDA_ARCHITECTURES=${QJOULE_CUDA_ARCHS:-75-real;80-real;86-real;89-real;90}") ;;
  # -O1 -g1 (line tables: the sanitizers' reports keep file:line): half the compile time of -O2 -g (measured
  # on three of the heaviest files: 12.7 -> 6.2 s, 38.0 -> 17.3 s, 31.0 -> 15.1 s), the longest step of CI.
  asan)    args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
                 -DQJOULE_WERROR=ON -DQJOULE_SANITIZE=ON -DQJOULE_BUILD_BENCH=OFF -DQJOULE_BUILD_PYTHON=OFF
                 -DQJOULE_CUDA=OFF) ;;
  debug)   args=(-DCMAKE_BUILD_TYPE=Debug -DQJOULE_UNITY_BUILD=OFF) ;;
  *) echo "build.sh: unknown flavour '$flavour' (expected release, asan or debug)" >&2; exit 2 ;;
esac
cmake -S . -B "build/$flavour" -G Ninja "${args[@]}" >/dev/null
cmake --build "build/$flavour" -j "$(nproc)" ${targets[@]:+--target "${targets[@]}"}
