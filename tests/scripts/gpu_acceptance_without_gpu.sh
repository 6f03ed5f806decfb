#!/usr/bin/env bash
# scripts/gpu-acceptance.sh on a machine without a usable GPU: reuses the build under test, exits 0
# with "no GPU: nothing to accept" and writes both reports. Where a GPU is usable this test is skipped
# (77): the script itself is the GPU acceptance run there.
set -euo pipefail
repo="$1"
build="$2"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Captured first: with pipefail, a pipe into head / grep -q fails when the writer gets SIGPIPE.
peak=$("$build/microbench/cuda_gemm_peak" --reps 1 --size 64 || true)
if ! grep -q '^no usable GPU: ' <<< "$(head -1 <<< "$peak")"; then
  echo "a GPU is usable here: run scripts/gpu-acceptance.sh itself"
  exit 77
fi
log=$(bash "$repo/scripts/gpu-acceptance.sh" "$out" --build-dir "$build")
echo "$log"
grep -q '^gpu-acceptance: no GPU: nothing to accept (' <<< "$log"
grep -q '"result": "no GPU: nothing to accept"' "$out/gpu-acceptance.json"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["gpu"] is None and d["reason"]' "$out/gpu-acceptance.json"
grep -q '^no GPU: nothing to accept (' "$out/gpu-acceptance.md"
echo "ok"
