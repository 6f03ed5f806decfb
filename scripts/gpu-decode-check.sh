#!/usr/bin/env bash
# The short GPU check of decode speed work (issue 40), for a lease of a few minutes: the decode kernels'
# tests, decode tok/s on the TinyLlama-shaped decoder, the decode GEMVs' bandwidth, and each kernel's
# GPU time in a decode step under Nsight Compute, in that order. Steps print as they end (the GEMV
# table row by row); logs go to OUT_DIR.
#   scripts/gpu-decode-check.sh OUT_DIR [BUILD_DIR]     (BUILD_DIR: default build/release, prebuilt or not)
# Environment (each a comma-separated list; empty skips the step):
#   CHECK_TESTS     ctest -R regex          (default 'CudaLinearGpu|CudaDecoderOps|DecoderGpu'; CHECK_TESTS_EXCLUDE:
#                   ctest -E regex, default none)
#   CHECK_GEMV      cuda_gemm_peak --gemv-formats (default int4,nf4,int8,fp16; add plain for the rows
#                   of QJOULE_CUDA_GEMV4=plain)
#   CHECK_DECODE    decode bench formats    (default int4,nf4,mxfp4,nvfp4,int8,fp16,bf16,fp32: the FP4 layers had
#                   not run on a GPU when they were written, issue 60)
#   CHECK_DECODE_PLAIN  the same with QJOULE_CUDA_GEMV4=plain, the other 4-bit GEMV (default int4,nf4,mxfp4;
#                   nvfp4 has only the split one)
#   CHECK_ENERGY    formats whose decode energy is measured twice over 3 windows of >= 2 s each (default int4:
#                   issue 55 asks two runs' mJ/token within 5%), each pair's ratio printed
#   CHECK_7B        formats decoded on Llama-2-7B shapes (hidden 4096, 32 layers, FFN 11008, vocabulary 32000),
#                   written here by write_synthetic_decoder (13.5 GB on disk, 27 GB of memory while it is drawn,
#                   about a minute; issue 55: int4 >= 3x fp16's
#                   tok/s), one bench for all of them (one FP32 reference), printed at its end (default
#                   fp16,int8,int4)
#   CHECK_PROFILE   formats profiled by ncu (default int4,fp16): a 2-layer model of the same widths,
#                   a 1-token prompt and 8 decode tokens, so every forward is a decode step
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/gpu-decode-check.sh OUT_DIR [BUILD_DIR]}
build=${2:-build/release}
mkdir -p "$out"
t0=$SECONDS
say() { echo "gpu-decode-check: [$((SECONDS - t0)) s] $*"; }
tests=${CHECK_TESTS-CudaLinearGpu|CudaDecoderOps|DecoderGpu}
gemv=${CHECK_GEMV-int4,nf4,int8,fp16}
decode=${CHECK_DECODE-int4,nf4,mxfp4,nvfp4,int8,fp16,bf16,fp32}
decode_plain=${CHECK_DECODE_PLAIN-int4,nf4,mxfp4}
energy=${CHECK_ENERGY-int4}
sevenb=${CHECK_7B-fp16,int8,int4}
profile=${CHECK_PROFILE-int4,fp16}
status=0
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader || true
if [ -n "$tests" ]; then
  ctest --test-dir "$build" -R "$tests" ${CHECK_TESTS_EXCLUDE:+-E "$CHECK_TESTS_EXCLUDE"} --output-on-failure \
    > "$out/tests.log" 2>&1 || status=1
  say "tests: $(grep -E 'tests passed' "$out/tests.log" | tail -1)"
  sed -n '/The following tests FAILED:/,$p' "$out/tests.log"
fi
model_dir=$(mktemp -d)
trap 'rm -rf "$model_dir"' EXIT
print_records() {  # RESULTS_JSONL NAME: a line a record, each figure or "unavailable"
  python3 - "$1" "$2" <<'PY'
import json, sys
def cell(v, spec):  # a figure the run has, else why not: never 0 for a missing one
    return "unavailable" if v is None else format(v, spec)
for line in open(sys.argv[1]):
    r = json.loads(line)
    step = next((n for n in r.get("notes") or [] if n.startswith("decode step: ")), "")
    windows = next((n for n in r.get("notes") or [] if n.startswith("decode energy in ")), "")
    spread = windows[windows.find("(spread"):] if "(spread" in windows else ""
    print(f"{sys.argv[2]:>12} {r.get('precision'):>6}: decode {cell(r.get('decode_tokens_per_s_mean'), '8.1f')} tok/s "
          f"{cell(r.get('decode_ms_per_token_mean'), '6.3f')} ms/token, roof {cell(r.get('decode_roof_fraction'), '.2f')}, "
          f"{cell(r.get('decode_mj_per_token'), '7.1f')} mJ/token {spread}, prefill {cell(r.get('tokens_per_s'), '.0f')} tok/s "
          f"{r.get('error') or ''} {step}")
PY
}
decode_bench() {  # NAME FORMATS MIN_TIME [ENV=VALUE]: one bench a format, each printed as it ends
  local name=$1 formats=$2 min_time=$3 f
  shift 3
  for f in ${formats//,/ }; do
    rm -rf "$out/$name-$f"
    env "$@" "$build/src/cli/qjoule" bench --model "$model_dir/tinyllama-shapes" --device cuda --precisions "$f" \
      --seq 128 --decode-tokens 64 --min-time "$min_time" --idle 1 --out "$out/$name-$f" > "$out/$name-$f.log" 2>&1 || status=1
    print_records "$out/$name-$f/results.jsonl" "$name" || tail -3 "$out/$name-$f.log"
    say "$name $f done"
  done
}
if [ -n "$decode$decode_plain$energy" ]; then
  "$build/microbench/write_synthetic_decoder" "$model_dir/tinyllama-shapes" > /dev/null
  [ -n "$decode" ] && decode_bench decode "$decode" 0.5 QJOULE_CUDA_GEMV4=split
  [ -n "$decode_plain" ] && decode_bench decode-plain "$decode_plain" 0.5 QJOULE_CUDA_GEMV4=plain
fi
if [ -n "$energy" ]; then
  decode_bench energy-a "$energy" 2
  decode_bench energy-b "$energy" 2
  for f in ${energy//,/ }; do
    python3 - "$out/energy-a-$f/results.jsonl" "$out/energy-b-$f/results.jsonl" "$f" <<'PY' || true
import json, os, sys
a, b = (json.loads(open(p).readline()).get("decode_mj_per_token") if os.path.exists(p) else None
        for p in sys.argv[1:3])
print(f"energy {sys.argv[3]}: two runs {a} and {b} mJ/token" + (f", ratio {b / a:.3f}" if a and b else " (unavailable)"))
PY
  done
fi
if [ -n "$gemv" ]; then
  say "GEMV table ($gemv):"
  "$build/microbench/cuda_gemm_peak" --gemv-only --gemv-formats "$gemv" --reps 10 2>&1 | tee "$out/gemv.txt" || status=1
fi
if [ -n "$sevenb" ]; then
  say "writing the Llama-2-7B-shaped decoder"
  "$build/microbench/write_synthetic_decoder" --shape llama-2-7b "$model_dir/llama2-7b-shapes" || status=1
  say "7B-shaped decode ($sevenb):"
  rm -rf "$out/7b"
  "$build/src/cli/qjoule" bench --model "$model_dir/llama2-7b-shapes" --device cuda --precisions "$sevenb" \
    --seq 128 --decode-tokens 64 --min-time 0.5 --decode-windows 1 --idle 1 --out "$out/7b" > "$out/7b.log" 2>&1 ||
    status=1
  print_records "$out/7b/results.jsonl" 7b || tail -3 "$out/7b.log"
  rm -rf "$model_dir/llama2-7b-shapes"
  say "7B-shaped decode done"
fi
if [ -n "$profile" ]; then
  if command -v ncu > /dev/null; then
    "$build/microbench/write_synthetic_decoder" --layers 2 "$model_dir/two-layers" > /dev/null
    for f in ${profile//,/ }; do
      ncu --clock-control none --metrics gpu__time_duration.sum --csv --print-units base \
        "$build/src/cli/qjoule" bench --model "$model_dir/two-layers" --device cuda --precisions "$f" --seq 1 \
        --decode-tokens 8 --warmup 0 --iters 1 --min-time 0 --idle 0 --out "$model_dir/prof-$f" \
        > "$out/ncu-$f.csv" 2> "$out/ncu-$f.err" || status=1
      python3 scripts/ncu-kernel-table.py "$out/ncu-$f.csv" auto > "$out/ncu-$f.md" || status=1
      say "profile $f:"
      head -30 "$out/ncu-$f.md"
    done
  else
    say "no ncu on this machine: no profile"
  fi
fi
exit $status
