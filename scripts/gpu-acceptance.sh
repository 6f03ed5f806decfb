#!/usr/bin/env bash
# The GPU acceptance run: one command for any machine with an NVIDIA GPU.
#   scripts/gpu-acceptance.sh OUT_DIR                      # build/gpu for this GPU's architecture only
#   scripts/gpu-acceptance.sh OUT_DIR --build-dir build/release   # reuse a build (CI, no second build)
#   scripts/gpu-acceptance.sh OUT_DIR --prebuilt build/release     # a build made elsewhere and copied here
#                                                     (a GPU machine without the build's packages): no cmake
#
# 1. Builds qjoule, its tests and benchmarks (for the local GPU's compute capability when nvidia-smi
#    names it). 2. Asks the CUDA runtime for a usable GPU; without one it writes OUT_DIR/gpu-acceptance.{json,md}
#    saying "no GPU: nothing to accept" with the reason, and exits 0. 3. With one: runs every GPU test
#    (each CUDA kernel against its CPU `_ref`, the GPU model against the CPU's, SST-2 accuracy on the
#    GPU = the CPU's within 0.2 point per format when ../shared is there, a decoder fixture's
#    perplexity on the GPU = the CPU's within 0.5% per format), then cuda_gemm_peak (cuBLASLt TFLOP/s
#    per format against the datasheet peak, the 4-bit GEMV bandwidth against a measured device-to-device
#    copy), then a decode benchmark per format on the TinyLlama-shaped synthetic decoder (decode
#    tokens/s and NVML millijoules per token), and writes the tables. Exit 1 when a GPU test or run failed.
# What no GPU path exists for yet is listed as unavailable with the reason, never left out.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: scripts/gpu-acceptance.sh OUT_DIR [--build-dir DIR | --prebuilt DIR]" >&2; exit 2; }
[ $# -ge 1 ] || usage
out="$1"
shift
build=build/gpu
reuse=0
prebuilt=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build-dir) [ $# -ge 2 ] || usage; build="$2"; reuse=1; shift 2 ;;
    --prebuilt) [ $# -ge 2 ] || usage; build="$2"; reuse=1; prebuilt=1; shift 2 ;;
    *) usage ;;
  esac
done
mkdir -p "$out"

if [ "$reuse" = 0 ]; then
  bash scripts/install-deps.sh
  arch=()
  if command -v nvidia-smi >/dev/null 2>&1; then
    cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
    [ -n "$cap" ] && arch=(-DCMAKE_CUDA_ARCHITECTURES="$cap")
  fi
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DQJOULE_WERROR=ON "${arch[@]}" >/dev/null
fi
[ "$prebuilt" = 1 ] || cmake --build "$build" -j "$(nproc)" >/dev/null

version=$("$build/src/cli/qjoule" --version)
probe=$("$build/microbench/cuda_gemm_peak" --reps 1 --size 64 2>&1 | head -1 || true)
json_text() { python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().rstrip("\n")))'; }

if [[ "$probe" == "no usable GPU: "* ]]; then
  reason=${probe#no usable GPU: }
  cat > "$out/gpu-acceptance.json" <<EOF
{"result": "no GPU: nothing to accept", "gpu": null, "reason": $(printf '%s' "$reason" | json_text), "qjoule": $(printf '%s' "$version" | json_text)}
EOF
  cat > "$out/gpu-acceptance.md" <<EOF
# qjoule GPU acceptance

no GPU: nothing to accept ($reason)

$version
EOF
  echo "gpu-acceptance: no GPU: nothing to accept ($reason); wrote $out/gpu-acceptance.json and .md"
  exit 0
fi

gpu=$(echo "$probe" | sed 's/^cuda_gemm_peak: //')
echo "gpu-acceptance: $gpu"
status=0
t0=$SECONDS
# The decode benchmark first, then the GEMV / GEMM figures, then the tests: a short lease keeps the
# figures that take longest to come by.
# Decode per format on the TinyLlama-shaped decoder, every weight and the KV cache on GPU 0.
# The model (2 GB) is written outside OUT_DIR and removed at exit.
model_dir=$(mktemp -d)
trap 'rm -rf "$model_dir"' EXIT
"$build/microbench/write_synthetic_decoder" "$model_dir/tinyllama-shapes" > /dev/null
rm -rf "$out/decode-bench"
"$build/src/cli/qjoule" bench --model "$model_dir/tinyllama-shapes" --device cuda --precisions fp32,fp16,bf16,int8,int4,nf4 \
  --seq 128 --decode-tokens 64 --min-time 1 --idle 2 --out "$out/decode-bench" > "$out/decode-bench.log" 2>&1 || status=1
echo "gpu-acceptance: decode benchmark done after $((SECONDS - t0)) s"
# The 4-bit decode with the other GEMV (QJOULE_CUDA_GEMV4=plain: one warp a row pair), beside it.
rm -rf "$out/decode-bench-plain"
QJOULE_CUDA_GEMV4=plain "$build/src/cli/qjoule" bench --model "$model_dir/tinyllama-shapes" --device cuda \
  --precisions int4,nf4 --seq 128 --decode-tokens 64 --min-time 1 --idle 2 --out "$out/decode-bench-plain" \
  > "$out/decode-bench-plain.log" 2>&1 || status=1
decode_table=$(python3 - "$out/decode-bench/results.jsonl" "$out/decode-bench-plain/results.jsonl" <<'PY' || true
import json, sys
def cell(v, f):
    return "unavailable" if v is None else f.format(v)
print("| precision | decode tok/s | decode ms/token | of the weight-read roof | decode mJ/token | prefill tok/s | model MiB | decode step | error |")
print("|---|---|---|---|---|---|---|---|---|")
rows = []
for path, label in ((sys.argv[1], ""), (sys.argv[2], " (QJOULE_CUDA_GEMV4=plain)")):
    try:
        rows += [dict(json.loads(line), label=label) for line in open(path) if line.strip()]
    except OSError as e:
        print(f"| (no results{label}: {e}) | | | | | | | | |")
for r in rows:
    mib = None if r.get("model_bytes") is None else r["model_bytes"] / 2**20
    step = next((n[len("decode step: "):] for n in r.get("notes") or [] if n.startswith("decode step: ")), "")
    print(f"| {r.get('precision')}{r['label']} | {cell(r.get('decode_tokens_per_s_mean'), '{:.1f}')} | "
          f"{cell(r.get('decode_ms_per_token_mean'), '{:.3f}')} | {cell(r.get('decode_roof_fraction'), '{:.2f}')} | "
          f"{cell(r.get('decode_mj_per_token'), '{:.2f}')} | {cell(r.get('tokens_per_s'), '{:.0f}')} | "
          f"{cell(mib, '{:.0f}')} | {step} | {r.get('error') or r.get('decode_energy_unavailable') or ''} |")
PY
)
"$build/microbench/cuda_gemm_peak" > "$out/cuda-gemm-peak.txt" 2>&1 || status=1
echo "gpu-acceptance: cuda_gemm_peak done after $((SECONDS - t0)) s"
ctest --test-dir "$build" -R "${QJOULE_GPU_TESTS:-Cuda|Gpu}" --output-on-failure > "$out/gpu-tests.log" 2>&1 || status=1
echo "gpu-acceptance: GPU tests done after $((SECONDS - t0)) s"
tests=$(grep -E "tests passed" "$out/gpu-tests.log" | tail -1 || true)
# Every test ctest lists as not passed: (Failed), (Subprocess aborted), (SEGFAULT), (Timeout), (Not Run).
failed=$(sed -n '/The following tests FAILED:/,$p' "$out/gpu-tests.log" | grep -E '^\s+[0-9]+ - ' | sed 's/^\s*//' || true)
[ -n "$tests" ] || { tests="no GPU test ran (ctest found none in $build)"; status=1; }
unavailable=""
cat > "$out/gpu-acceptance.json" <<EOF
{"result": $( [ $status = 0 ] && echo '"accepted"' || echo '"failed"'), "gpu": $(printf '%s' "$gpu" | json_text),
 "tests": $(printf '%s' "$tests" | json_text), "failed_tests": $(printf '%s' "$failed" | json_text),
 "cuda_gemm_peak": $(json_text < "$out/cuda-gemm-peak.txt"),
 "decode_per_format": $(printf '%s' "$decode_table" | json_text),
 "unavailable": [$(if [ -n "$unavailable" ]; then printf '%s' "$unavailable" | json_text; fi)], "qjoule": $(printf '%s' "$version" | json_text)}
EOF
{
  echo "# qjoule GPU acceptance"
  echo
  echo "$gpu"
  echo
  echo "## GPU tests (each kernel against its CPU reference; SST-2 accuracy and decoder perplexity on GPU against CPU)"
  echo
  echo "$tests"
  [ -n "$failed" ] && printf '\nFailed:\n\n%s\n' "$failed"
  echo
  echo "## cuda_gemm_peak"
  echo
  echo '```'
  cat "$out/cuda-gemm-peak.txt"
  echo '```'
  echo
  echo "## Decode per format (TinyLlama-shaped synthetic decoder, seq 128, 64 decode tokens, GPU 0)"
  echo
  echo "$decode_table"
  echo
  if [ -n "$unavailable" ]; then
    echo "## Not measured"
    echo
    echo "- $unavailable"
    echo
  fi
  echo "$version"
} > "$out/gpu-acceptance.md"
echo "gpu-acceptance: $tests; wrote $out/gpu-acceptance.json and .md"
exit $status
