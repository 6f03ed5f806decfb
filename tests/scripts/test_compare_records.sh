#!/usr/bin/env bash
# scripts/compare-records.py on two scratch result folders: equal records but for measured fields pass,
# a changed field is named (exit 1), a field the old records lack is listed as added, a run in one set
# only is named, and a line that is not a JSON record is one line naming the file and line.
set -euo pipefail
compare="$1"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/old/a" "$tree/new/a"
printf '%s\n' '{"run_name": "r1", "precision": "int4", "kernel_paths": ["int4 k x2"], "latency_p50_ms": 1.0, "tasks": {"t": {"acc": 0.5, "tokens_per_s": 10}}}' \
  > "$tree/old/a/results.jsonl"
printf '%s\n' '{"run_name": "r1", "precision": "int4", "kernel_paths": ["int4 k x2"], "latency_p50_ms": 9.0, "tasks": {"t": {"acc": 0.5, "tokens_per_s": 99}}, "environment": {"kernel_overrides": {}}}' \
  > "$tree/new/a/results.jsonl"
out=$(python3 "$compare" "$tree/old" "$tree/new") || { echo "FAIL: measured fields counted: $out"; exit 1; }
grep -q 'added: environment (in 1 of the new records' <<<"$out" || { echo "FAIL: $out"; exit 1; }
grep -q '1 runs against 1, 0 difference(s)' <<<"$out" || { echo "FAIL: $out"; exit 1; }
sed -i 's/"acc": 0.5, "tokens_per_s": 99/"acc": 0.25, "tokens_per_s": 99/' "$tree/new/a/results.jsonl"
if out=$(python3 "$compare" "$tree/old" "$tree/new"); then echo "FAIL: a changed field passed: $out"; exit 1; fi
grep -q 'a/r1: tasks.t.acc: 0.5 -> 0.25' <<<"$out" || { echo "FAIL: $out"; exit 1; }
printf '%s\n' '{"run_name": "r2"}' >> "$tree/new/a/results.jsonl"
out=$(python3 "$compare" "$tree/old" "$tree/new") || true
grep -q 'a/r2: only in NEW' <<<"$out" || { echo "FAIL: $out"; exit 1; }
printf 'not json\n' >> "$tree/new/a/results.jsonl"
if out=$(python3 "$compare" "$tree/old" "$tree/new" 2>&1); then echo "FAIL: a bad line passed: $out"; exit 1; fi
[[ "$out" == "compare-records: $tree/new/a/results.jsonl:3: not a JSON record (Expecting value at column 1)" ]] ||
  { echo "FAIL: $out"; exit 1; }
echo "compare-records: measured fields left out, a changed field and a lone run named, a bad line one line"
