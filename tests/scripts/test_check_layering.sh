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
# A precision spec's text parsed below where it enters is named; in quant/ (and commented) it is not.
mkdir -p "$tree/src/quant"
printf 'auto f = quant::parse_format_spec("int8");\n' > "$tree/src/quant/spec.cpp"
printf '#include "io/file.h"\n// parse_format_spec(text) is the quant module'"'"'s\nconst auto s = quant::try_parse_format_spec(c.precision);\n' > "$tree/src/bench/run.cpp"
if out=$(python3 "$checker" "$tree"); then
  echo "FAIL: a spec parsed in bench passed: $out"; exit 1
fi
grep -q "src/bench/run.cpp:3: parses a precision spec's text" <<<"$out" || { echo "FAIL: $out"; exit 1; }
[[ $(grep -c "parses a precision spec" <<<"$out") == 1 ]] || { echo "FAIL: more than the one call named: $out"; exit 1; }
echo "check-layering: flags an upward include and a spec parsed below where it enters, passes a clean tree"
