#!/usr/bin/env bash
# Installs what is missing, builds qjoule (release) and runs the default benchmark.
# Until `qjoule bench` lands, the default benchmark is `qjoule info` + `qjoule eval` on the tiny BERT
# classifier the project generates (tests/fixtures/tiny-bert, from tools/make_tiny_bert_fixture.py),
# and, when ../shared is present, on the SST-2 DistilBERT classifier with the SST-2 dev set.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh release
qjoule=build/release/src/cli/qjoule
"$qjoule" --version
echo
echo "== qjoule info: tests/fixtures/tiny-bert =="
"$qjoule" info --model tests/fixtures/tiny-bert
echo
echo "== qjoule eval: tests/fixtures/tiny-bert on its 12 examples =="
"$qjoule" eval --model tests/fixtures/tiny-bert --dataset tests/fixtures/tiny-bert/dataset.tsv
shared=../shared/data
if [ -d "$shared/models/sst2-distilbert-mini" ]; then
  echo
  echo "== qjoule eval: sst2-distilbert-mini on SST-2 dev (872 sentences) =="
  "$qjoule" eval --model "$shared/models/sst2-distilbert-mini" --dataset "$shared/sst2/dev.tsv" --max-length 128
else
  echo
  echo "(../shared absent: skipping the SST-2 evaluation)"
fi
