#!/usr/bin/env bash
# Installs what is missing, builds qjoule (release) and runs the default benchmark: `qjoule bench`
# with no arguments (the embedded DistilBERT-base-shaped model: fp32, bf16, int8, w8, int4, nf4 at
# batch 1 and 8, 128 tokens; a few minutes on 2 cores), then, when ../shared is present, the SST-2
# DistilBERT classifier on the SST-2 dev set (accuracy beside speed) in fp32, int8 and nf4.
# Results go to qjoule-bench/<UTC time>/ (results.jsonl, results.csv, summary.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh --build  # what building and running qjoule need (not the tests' browser, clang, Slurm)
# Only what runs here: the qjoule binary (no tests, microbenchmarks or Python module: run-tests.sh builds
# those), its CUDA code for this machine's GPUs only, or, without one, once as sm_75 PTX.
archs="75-virtual"
if command -v nvidia-smi >/dev/null 2>&1; then
  caps=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | tr -d '. ' | sort -u || true)
  [ -n "$caps" ] && archs=$(sed 's/$/-real/' <<<"$caps" | paste -sd';')
fi
QJOULE_CUDA_ARCHS="$archs" bash scripts/build.sh release qjoule
qjoule=build/release/src/cli/qjoule
"$qjoule" --version
echo
echo "== qjoule bench (default sweep) =="
"$qjoule" bench
shared=../shared/data
if [ -d "$shared/models/sst2-distilbert-mini" ]; then
  echo
  echo "== qjoule bench: sst2-distilbert-mini on SST-2 dev (872 sentences) =="
  "$qjoule" bench --model "$shared/models/sst2-distilbert-mini" --dataset "$shared/sst2/dev.tsv" \
    --precisions fp32,int8,nf4 --batch 32 --seq 128
else
  echo
  echo "(../shared absent: skipping the SST-2 benchmark)"
fi
