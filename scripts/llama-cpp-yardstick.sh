#!/usr/bin/env bash
# The CPU yardstick of issue 41: qjoule and llama.cpp on the same weights, taking turns.
#   scripts/llama-cpp-yardstick.sh --llama-src DIR [--work DIR] [--threads N] [--rounds N] [--layers N]
#                                  [--vocab N]
# --llama-src: a llama.cpp source tree: a git checkout (e.g. b4748), or the current release as the
# llama-cpp-python sdist vendors it (pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36;
# tar -xzf it; DIR = llama_cpp_python-0.3.36/vendor/llama.cpp: its llama-bench, perplexity and quantize
# come with it, and it has upstream's AMX Q4_0 fix); nothing is fetched here.
# It builds llama.cpp's llama-bench, llama-perplexity and llama-quantize twice, natively and natively
# without AMX (-mno-amx-tile -mno-amx-int8 -mno-amx-bf16: b4748's AMX Q4_0 / Q4_1 kernels give wrong
# results; on a CPU without AMX the two builds are the same and only one is made), then
#  1. checks each peer path on a small model with a real text (tests/fixtures/decoders/tiny-llama,
#     its tokenizer; --check-model DIR --check-text FILE to choose): llama-perplexity of Q4_0 and Q8_0
#     against the same build's own F32 (within 3% / 1%), and qjoule ppl of int4:g=32:sym and int8 on
#     the same model; a path off its own F32 is reported and not timed ("a peer's speed counts only
#     where its results are right");
#  2. writes a TinyLlama-shaped synthetic checkpoint (build/release/microbench/write_synthetic_decoder,
#     --layers, default 22; --vocab, default 4096, TinyLlama's own 32000), exports it with `qjoule export
#     --to gguf` (Q4_0 = int4:g=32:sym's codes, F16; the output matrix as stored, BF16) and makes Q8_0 and
#     Q4_K_M with llama-quantize (its output matrix as llama-quantize chooses: Q6_K);
#  3. times, for --rounds rounds (default 2), each pair back to back: qjoule bench (prompt 128, 64 decode
#     tokens) and llama-bench (-p 128 -n 64), and prints prefill and decode tokens/s side by side with the
#     ratio and qjoule's decode roof fraction.
# Not in CI (it builds a peer from source: ~10 minutes on 2 cores). Needs build/release (scripts/build.sh
# release). The README's performance section gives the last figures and the CPU they came from.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
llama_src="" work="$root/build/yardstick" threads=2 rounds=2 layers=22 vocab=4096
check_model="$root/tests/fixtures/decoders/trained-llama" check_text=""
usage() { echo "usage: scripts/llama-cpp-yardstick.sh --llama-src DIR [--work DIR] [--threads N] [--rounds N] [--layers N] [--vocab N] [--check-model DIR] [--check-text FILE]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --llama-src) llama_src="${2:?}"; shift 2 ;;
    --work) work="${2:?}"; shift 2 ;;
    --threads) threads="${2:?}"; shift 2 ;;
    --rounds) rounds="${2:?}"; shift 2 ;;
    --layers) layers="${2:?}"; shift 2 ;;
    --vocab) vocab="${2:?}"; shift 2 ;;
    --check-model) check_model="${2:?}"; shift 2 ;;
    --check-text) check_text="${2:?}"; shift 2 ;;
    *) usage ;;
  esac
done
[ -n "$llama_src" ] || usage
[ -f "$llama_src/CMakeLists.txt" ] || { echo "yardstick: --llama-src $llama_src: no CMakeLists.txt, expected a llama.cpp source tree" >&2; exit 2; }
# Which llama.cpp: its git tag, or the llama-cpp-python release that vendors it.
llama_version="$(git -C "$llama_src" describe --tags 2>/dev/null ||
  sed -n 's/^Version: \(.*\)/vendored by llama-cpp-python \1/p' "$llama_src/../../PKG-INFO" 2>/dev/null || true)"
[ -n "$llama_version" ] || llama_version="(no git tag)"
qjoule="$root/build/release/src/cli/qjoule"
writer="$root/build/release/microbench/write_synthetic_decoder"
for b in "$qjoule" "$writer"; do
  [ -x "$b" ] || { echo "yardstick: $b is missing; expected build/release (bash scripts/build.sh release)" >&2; exit 2; }
done
mkdir -p "$work"
echo "== CPU: $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) CPUs), $threads threads; llama.cpp $llama_version"

# ---- 1. llama.cpp, built natively, and without AMX where the CPU has it --------------------------------
builds=(native)
if grep -qw amx_tile /proc/cpuinfo; then builds+=(noamx); else echo "   no AMX on this CPU: one native build serves both"; fi
for b in "${builds[@]}"; do
  flags=""
  [ "$b" = noamx ] && flags="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  if [ ! -x "$work/llama-$b/bin/llama-bench" ]; then
    echo "== building llama.cpp ($b) in $work/llama-$b"
    cmake -S "$llama_src" -B "$work/llama-$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
      -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" >/dev/null
    cmake --build "$work/llama-$b" --target llama-bench llama-perplexity llama-quantize -j "$(nproc)" >/dev/null
  fi
done

# ---- 2. correctness on a small model and a real text --------------------------------------------------
if [ -z "$check_text" ]; then
  check_text="$work/check.txt"
  [ -f "$root/../shared/data/wikitext2/test.txt" ] && head -c 60000 "$root/../shared/data/wikitext2/test.txt" > "$check_text" ||
    for i in $(seq 1 400); do echo "The quick brown fox $i jumps over the lazy dog by the river."; done > "$check_text"
fi
rm -f "$work"/check-*.gguf  # export never overwrites: the check model may have changed since the last run
"$qjoule" export --model "$check_model" --precision fp32 --to gguf --out "$work/check-f32.gguf" >/dev/null
"$qjoule" export --model "$check_model" --precision int4:g=32:sym --to gguf --out "$work/check-q4_0.gguf" >/dev/null
"${work}/llama-native/bin/llama-quantize" "$work/check-f32.gguf" "$work/check-q8_0.gguf" Q8_0 >/dev/null 2>&1
"${work}/llama-native/bin/llama-quantize" "$work/check-f32.gguf" "$work/check-q4_k_m.gguf" Q4_K_M >/dev/null 2>&1
ppl_llama() { "$work/llama-$1/bin/llama-perplexity" -m "$2" -f "$check_text" -c 64 -t "$threads" 2>&1 | sed -n 's/.*Final estimate: PPL = \([0-9.]*\).*/\1/p'; }
ppl_qjoule() { "$qjoule" ppl --model "$check_model" --text "$check_text" --ctx 64 --stride 64 --threads "$threads" --precision "$1" | sed -n 's/^perplexity \([0-9.]*\).*/\1/p'; }
declare -A right
echo "== correctness: perplexity on $(basename "$check_model") / $(basename "$check_text") against each engine's own F32"
for b in "${builds[@]}"; do
  f32="$(ppl_llama "$b" "$work/check-f32.gguf")"
  for t in q4_0 q4_k_m q8_0; do
    p="$(ppl_llama "$b" "$work/check-$t.gguf")"
    verdict="$(python3 -c "import sys; p, f, t = float('$p' or 'nan'), float('$f32' or 'nan'), '$t'; d = p / f - 1; print(f'{d:+.2%}', 'right' if abs(d) <= (0.01 if t == 'q8_0' else 0.03) else 'WRONG')")"
    echo "   llama.cpp ($b) $t: ppl $p vs F32 $f32: $verdict"
    right["$b/$t"]="$([[ "$verdict" == *right ]] && echo 1 || echo 0)"
  done
done
q32="$(ppl_qjoule fp32)"
for spec in int4:g=32:sym int4:g=32:sym:a8 int8 w8 nf4; do
  echo "   qjoule $spec: ppl $(ppl_qjoule "$spec") vs fp32 $q32"
done

# ---- 3. the synthetic 1.1B-shaped model, both engines, taking turns -----------------------------------
model="$work/synthetic-$layers-v$vocab"
if [ ! -f "$model/model.safetensors" ]; then
  "$writer" --layers "$layers" --vocab "$vocab" --tokenizer "$root/tests/fixtures/decoders/tiny-llama" "$model" >/dev/null
fi
m="$work/m-$layers-v$vocab"  # the GGUF files' stem: one set for each model
[ -f "$m-q4_0.gguf" ] || "$qjoule" export --model "$model" --precision int4:g=32:sym --to gguf --out "$m-q4_0.gguf" >/dev/null
[ -f "$m-f16.gguf" ] || "$qjoule" export --model "$model" --precision fp16 --to gguf --out "$m-f16.gguf" >/dev/null
[ -f "$m-q8_0.gguf" ] || "$work/llama-native/bin/llama-quantize" "$m-f16.gguf" "$m-q8_0.gguf" Q8_0 >/dev/null 2>&1
[ -f "$m-q4_k_m.gguf" ] || "$work/llama-native/bin/llama-quantize" "$m-f16.gguf" "$m-q4_k_m.gguf" Q4_K_M >/dev/null 2>&1
# qjoule format -> llama.cpp type and the build whose path it is compared with (Q8_0: native, AMX where
# present; Q4_0: without AMX where there are two builds).
q4_build="${builds[-1]}"
pairs=("int4:g=32:sym:a8 q4_0 $q4_build" "int4:g=32:sym q4_0 $q4_build" "int4:g=32:sym q4_k_m $q4_build" "nf4 q4_0 $q4_build"
  "w8 q8_0 native" "int8 q8_0 native")
qjoule_speed() {  # prefill tok/s, decode tok/s, decode roof fraction
  local out="$work/bench-$RANDOM"
  if ! "$qjoule" bench --model "$model" --precisions "$1" --seq 128 --decode-tokens 64 --threads "$threads" --idle 0 \
    --min-time 1 --out "$out" >"$out.log" 2>&1; then
    echo "yardstick: qjoule bench --precisions $1 failed: $(tail -1 "$out.log")" >&2
    exit 1
  fi
  rm -f "$out.log"
  python3 -c "import json; r = json.loads(open('$out/results.jsonl').read().splitlines()[-1]); f = r.get('decode_roof_fraction'); print(r['prefill_tokens_per_s_mean'], r['decode_tokens_per_s_mean'], 'n/a' if f is None else f'{f:.2f}')"
  rm -rf "$out"
}
llama_speed() {  # prefill tok/s, decode tok/s
  "$work/llama-$1/bin/llama-bench" -m "$2" -p 128 -n 64 -t "$threads" -r 2 -o json 2>"$work/llama-bench.log" |
    python3 -c "import json, sys; rows = json.load(sys.stdin); pp = [r['avg_ts'] for r in rows if r['n_prompt'] > 0]; tg = [r['avg_ts'] for r in rows if r['n_gen'] > 0]; print(pp[0], tg[0])"
}
echo "== speed, $rounds rounds taking turns (tokens/s; ratio = qjoule / llama.cpp)"
printf '   %-18s %-14s %10s %10s %6s %10s %10s %7s %7s\n' qjoule llama.cpp "q prefill" "l prefill" ratio "q decode" "l decode" ratio roof
for r in $(seq 1 "$rounds"); do
  for pair in "${pairs[@]}"; do
    read -r spec type b <<<"$pair"
    if [ "${right[$b/$type]:-1}" != 1 ]; then
      printf '   %-18s %-14s %s\n' "$spec" "$type ($b)" "not timed: llama.cpp's path is off its own F32 (above)"
      continue
    fi
    q="$(qjoule_speed "$spec")" || exit 1
    l="$(llama_speed "$b" "$m-$type.gguf")" ||
      { echo "yardstick: llama-bench on $m-$type.gguf failed: $(tail -1 "$work/llama-bench.log")" >&2; exit 1; }
    read -r qp qd roof <<<"$q"
    read -r lp ld <<<"$l"
    python3 -c "print('   %-18s %-14s %10.1f %10.1f %5.2fx %10.2f %10.2f %6.2fx %7s' % ('$spec', '$type ($b)', $qp, $lp, $qp / $lp, $qd, $ld, $qd / $ld, '$roof'))"
  done
done
