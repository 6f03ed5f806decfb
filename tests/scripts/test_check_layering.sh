#!/usr/bin/env bash
# scripts/check-layering.py on a scratch tree: a module including one listed below it is named with its
# file and line, and exits 1; the same tree without that include passes.
set -euo pipefail
checker="$1"
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/docs" "$tree/src/io" "$tree/src/bench" "$tree/include/qjoule/report"
cat > "$tree/docs/architecture.md" <<'TABLE'
| module | what it holds |
| --- | --- |
| `io` | files |
| `bench` | runs |
| `report` | pages |
TABLE
printf '#include "qjoule/error.h"\n#include "io/file.h"\n#include "qjoule/report/page.h"\n' > "$tree/src/bench/run.cpp"
printf '#include "qjoule/bench/run.h"\n' > "$tree/include/qjoule/report/page.h"
if out=$(python3 "$checker" "$tree"); then
  echo "FAIL: an upward include passed: $out"; exit 1
fi
grep -q 'src/bench/run.cpp:3: bench includes qjoule/report/page.h of report' <<<"$out" || { echo "FAIL: $out"; exit 1; }
printf '#include "io/file.h"\n' > "$tree/src/bench/run.cpp"
out=$(python3 "$checker" "$tree") || { echo "FAIL: a clean tree failed: $out"; exit 1; }
grep -q 'no upward include (3 modules)' <<<"$out" || { echo "FAIL: $out"; exit 1; }
echo "check-layering: flags an upward include, passes a clean tree"
