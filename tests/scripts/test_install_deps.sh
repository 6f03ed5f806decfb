#!/usr/bin/env bash
# scripts/install-deps.sh as run-tests.sh and run-benchmark.sh call it, on this machine (where the tests
# run, everything is installed): both sets are present, so each exits 0 without touching apt; a bad
# argument is the usage line and exit 2.
set -euo pipefail
script="$1"
bash "$script" --build
bash "$script"
if out=$(bash "$script" --all 2>&1); then echo "FAIL: --all was accepted"; exit 1; fi
[[ "$out" == "usage: scripts/install-deps.sh [--build]" ]] || { echo "FAIL: $out"; exit 1; }
# The --build set is a part of the whole set, and the whole set adds what only the tests use.
build=$(bash -c 'source <(sed -n "/^build_packages=(/,/^)/p" "$1"); echo "${build_packages[@]}"' _ "$script")
for p in chromium clang slurm-wlm python3-pandas; do
  grep -qw -- "$p" <<< "$build" && { echo "FAIL: --build installs $p"; exit 1; }
done
for p in libdnnl-dev libfmt-dev libjs-chart.js pybind11-dev; do
  grep -qw -- "$p" <<< "$build" || { echo "FAIL: --build lacks $p"; exit 1; }
done
echo "install-deps: --build and the whole set present, a bad argument is the usage line"
