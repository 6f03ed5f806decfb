#!/usr/bin/env bash
# Builds the fuzz targets (fuzz/: Debian's clang, libFuzzer, ASan + UBSan) into build/fuzz and runs each
# for SECONDS (default 20) from a seed corpus made of the test fixtures. A crash, a leak or a sanitizer
# report fails the script; the input that caused it is left in build/fuzz/findings/ (replay it with
# `build/fuzz/<target> build/fuzz/findings/<file>`).
#   scripts/fuzz.sh          # 20 s per target (CI)
#   scripts/fuzz.sh 600      # longer, by hand
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-20}"
# -O1 -g1, as the ASan build: 145 s of compile CPU instead of 328 s at -O2 -g (measured 2026-11-27).
CC=clang CXX=clang++ cmake -S fuzz -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" >/dev/null
cmake --build build/fuzz -j "$(nproc)"

fixtures=tests/fixtures
corpus=build/fuzz/corpus
findings=build/fuzz/findings
rm -rf "$corpus"
mkdir -p "$findings" "$corpus"/fuzz_safetensors "$corpus"/fuzz_shard_index "$corpus"/fuzz_tokenizer_json \
  "$corpus"/fuzz_dataset "$corpus"/fuzz_config_json "$corpus"/fuzz_kl_base "$corpus"/fuzz_bnb_quant_state "$corpus"/fuzz_gguf
cp "$fixtures"/tiny-bert/model.safetensors "$corpus"/fuzz_safetensors/tiny-bert
printf '%s' '{"metadata": {}, "weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}' \
  > "$corpus"/fuzz_shard_index/two-shards
printf '%s' '{"weight_map": {"a": "../s1.safetensors"}}' > "$corpus"/fuzz_shard_index/outside
i=0
for f in "$fixtures"/bpe/*/tokenizer.json "$fixtures"/decoders/*/tokenizer.json; do
  i=$((i + 1)); cp "$f" "$corpus/fuzz_tokenizer_json/seed$i"
done
cp "$fixtures"/tiny-bert/dataset.tsv "$corpus"/fuzz_dataset/tsv
printf '%s\n' '{"sentence": "a fine film", "label": 1}' '{"input_ids": [2, 7, 3], "label": 0}' \
  > "$corpus"/fuzz_dataset/jsonl
i=0
for f in "$fixtures"/tiny-bert/config.json "$fixtures"/decoders/*/config.json; do
  i=$((i + 1)); cp "$f" "$corpus/fuzz_config_json/seed$i"
done
cp fuzz/seeds/kl_base_v2.qjkl "$corpus"/fuzz_kl_base/v2
cp fuzz/seeds/tiny.gguf "$corpus"/fuzz_gguf/tiny
printf '%s' '{"quant_type": "nf4", "blocksize": 64, "dtype": "float16", "shape": [256, 128]}' \
  > "$corpus"/fuzz_bnb_quant_state/nf4
printf '%s' '{"quant_type": "nf4", "blocksize": 64, "dtype": "bfloat16", "shape": [256, 128], "nested_blocksize": 256, "nested_dtype": "float32", "nested_offset": 0.0123}' \
  > "$corpus"/fuzz_bnb_quant_state/nf4-dq
# Inputs that crashed a target once are replayed on every run (fuzz/regressions/README.md).
for dir in fuzz/regressions/fuzz_*/; do
  target=$(basename "$dir")
  cp "$dir"* "$corpus/$target/"
done

# The targets run side by side, as many at a time as there are CPUs (each is one process): CI's fuzz step took
# 8 x 20 s one after another. Each one's verdict is printed in the list's order once all have ended.
run_target() {
  local target=$1 max_len=8192
  [ "$target" = fuzz_safetensors ] && max_len=131072
  [ "$target" = fuzz_tokenizer_json ] && max_len=65536
  if UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 build/fuzz/"$target" -max_total_time="$seconds" \
      -max_len="$max_len" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$findings/$target-" "$corpus/$target" 2> "build/fuzz/$target.log"; then
    echo ok > "build/fuzz/$target.verdict"
  else
    echo failed > "build/fuzz/$target.verdict"
  fi
}
targets=(fuzz_safetensors fuzz_shard_index fuzz_tokenizer_json fuzz_dataset fuzz_config_json fuzz_kl_base
         fuzz_bnb_quant_state fuzz_gguf)
jobs_at_once=$(nproc)
echo "fuzz: ${#targets[@]} targets for ${seconds} s each, $jobs_at_once at a time"
running=0
for target in "${targets[@]}"; do
  rm -f "build/fuzz/$target.verdict"
  run_target "$target" &
  running=$((running + 1))
  if [ "$running" -ge "$jobs_at_once" ]; then
    wait -n || true
    running=$((running - 1))
  fi
done
wait || true
status=0
for target in "${targets[@]}"; do
  if [ "$(cat "build/fuzz/$target.verdict" 2>/dev/null)" != ok ]; then
    echo "fuzz: $target FAILED; the last lines of build/fuzz/$target.log:"
    tail -n 30 "build/fuzz/$target.log"
    status=1
  else
    echo "fuzz: $target: $(grep -E "stat::number_of_executed_units|stat::peak_rss_mb" "build/fuzz/$target.log" \
      | tr '\n' ' ')"
  fi
done
exit $status
