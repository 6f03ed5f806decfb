#!/usr/bin/env bash
# Prefill of the weight-only formats whose weights are repacked at load (AVX512_VNNI) three ways, back to back:
# on the rows' BF16 or FP32 panels decoded from the repacked layout for oneDNN's matmul
# (QJOULE_REPACKED_PREFILL=panels: what qjoule runs where those panels run on AMX tiles), on the x16 kernel at
# every m (QJOULE_REPACKED_PREFILL=x16: what it runs elsewhere), and on the format's rows
# (QJOULE_WEIGHT_ONLY_LAYOUT=rows), so that a session on a new CPU (an Intel Xeon with AMX above all) sees in one
# command what each prefill costs:
#   scripts/repacked-prefill-check.sh [--rounds N] [--m M] [--formats "int4 nf4 nf4:dq mxfp4 nvfp4"]
#                                     [--shapes "2048x5632 5632x2048 768x3072"] [--threads T] [--min-time S]
# --shapes: K x N (in × out); --threads: default all the CPUs. Each round times every format and shape in the
# three ways (panels, x16, rows) with build/release/microbench/bench_linear; the table gives µs a call, the panels'
# and the rows' kernel paths, and x16 ÷ panels and rows ÷ panels (below 1: that way is faster). The panels need
# the avx512_bf16 level (AVX512_BF16); below it both repacked ways run x16. Not in CI (a benchmark).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=2 m=128 formats="int4 nf4 nf4:dq mxfp4 nvfp4" shapes="2048x5632 5632x2048 768x3072" threads="$(nproc)" min_time=0.3
usage() {
  echo "usage: scripts/repacked-prefill-check.sh [--rounds N] [--m M] [--formats LIST] [--shapes LIST] [--threads T] [--min-time S]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds="${2:?}"; shift 2 ;;
    --m) m="${2:?}"; shift 2 ;;
    --formats) formats="${2:?}"; shift 2 ;;
    --shapes) shapes="${2:?}"; shift 2 ;;
    --threads) threads="${2:?}"; shift 2 ;;
    --min-time) min_time="${2:?}"; shift 2 ;;
    *) usage ;;
  esac
done
bench="build/release/microbench/bench_linear"
[ -x "$bench" ] || { echo "repacked-prefill-check: $bench is missing; expected build/release (bash scripts/build.sh release)" >&2; exit 2; }
amx="no AMX"
grep -qw amx_tile /proc/cpuinfo && amx="AMX in /proc/cpuinfo"
echo "== $(lscpu | sed -n 's/^Model name: *//p') ($(nproc) CPUs, $amx), $threads threads, M = $m, rounds: $rounds"
# bench_linear registers M in {1, 32, 128, 1024, 4096} and its fixed shapes; a filter that matches nothing is an error.
fmt_re="$(echo "$formats" | tr ' ' '\n' | sed 's/[.]/\\./g' | paste -sd'|')"
shape_re="$(echo "$shapes" | tr ' ' '\n' | sed 's|^\([0-9]*\)x\([0-9]*\)$|K:\1/N:\2|' | paste -sd'|')"
filter="linear/($fmt_re)/M:$m/($shape_re)/threads:$threads/"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for r in $(seq 1 "$rounds"); do
  for layout in panels x16 rows; do
    QJOULE_WEIGHT_ONLY_LAYOUT=$([ "$layout" = rows ] && echo rows || echo repacked) \
      QJOULE_REPACKED_PREFILL=$([ "$layout" = x16 ] && echo x16 || echo panels) "$bench" \
      --benchmark_filter="$filter" --benchmark_min_time="$min_time" --benchmark_format=csv 2>/dev/null \
      > "$out/$r-$layout.csv"
    [ "$(wc -l < "$out/$r-$layout.csv")" -gt 1 ] || { echo "repacked-prefill-check: bench_linear ran nothing for '$filter' (M and shapes must be ones it registers)" >&2; exit 2; }
  done
done
python3 - "$out" "$rounds" <<'EOF'
import csv, os, sys
out, rounds = sys.argv[1], int(sys.argv[2])
times, paths = {}, {}
for r in range(1, rounds + 1):
    for layout in ("panels", "x16", "rows"):
        with open(os.path.join(out, f"{r}-{layout}.csv")) as f:
            for row in csv.DictReader(f):
                name = row["name"].replace("/real_time", "").replace("linear/", "")
                times.setdefault((name, layout), []).append(float(row["real_time"]))
                paths[(name, layout)] = row["label"].split(" | ")[0]
names = sorted({n for n, _ in times})
print("| format / shape | panels µs | x16 µs | rows µs | x16 ÷ panels | rows ÷ panels | panels path | rows path |")
print("|---|---:|---:|---:|---:|---:|---|---|")
for n in names:
    rep, x16, rows = (times.get((n, layout), []) for layout in ("panels", "x16", "rows"))
    def ratios(other):
        return ", ".join(f"{b / a:.2f}" for a, b in zip(rep, other))
    def us(ts):
        return ", ".join(f"{t:.0f}" for t in ts)
    print(f"| {n} | {us(rep)} | {us(x16)} | {us(rows)} | {ratios(x16)} | {ratios(rows)} | "
          f"{paths.get((n, 'panels'), '')} | {paths.get((n, 'rows'), '')} |")
EOF
