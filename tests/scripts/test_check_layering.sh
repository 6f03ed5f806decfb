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
# A module in bands: the root includes a sub-folder listed below it (named), a sub-folder listed above it
# includes the root (fine), and a sub-folder without a row is named.
rm -f "$tree/src/quant/spec.cpp" "$tree/src/bench/run.cpp"
cat > "$tree/docs/architecture.md" <<'TABLE'
| module | what it holds |
| --- | --- |
| `io` | files |
| `model/readers` | readers |
| `model` | graphs |
| `model/calibration` | calibration |
TABLE
mkdir -p "$tree/src/model/readers" "$tree/src/model/calibration"
printf '#include "qjoule/model/readers/reader.h"\n' > "$tree/src/model/readers/reader.cpp"
printf '#include "qjoule/model/readers/reader.h"\n#include "model/calibration/run.h"\n' > "$tree/src/model/graph.cpp"
printf '#include "qjoule/model/graph.h"\n' > "$tree/src/model/calibration/run.cpp"
if out=$(python3 "$checker" "$tree"); then
  echo "FAIL: the root including a band below it passed: $out"; exit 1
fi
grep -q 'src/model/graph.cpp:2: model includes model/calibration/run.h of model/calibration' <<<"$out" || { echo "FAIL: $out"; exit 1; }
printf '#include "qjoule/model/readers/reader.h"\n' > "$tree/src/model/graph.cpp"
out=$(python3 "$checker" "$tree") || { echo "FAIL: a clean banded tree failed: $out"; exit 1; }
mkdir -p "$tree/src/model/export"
if out=$(python3 "$checker" "$tree"); then
  echo "FAIL: a folder of model with no row passed: $out"; exit 1
fi
grep -q 'src/model/export: a folder of model with no row' <<<"$out" || { echo "FAIL: $out"; exit 1; }
# A kernel choice read with getenv in src/model (or src/kernels) instead of the overrides' table is named.
rmdir "$tree/src/model/export"
printf 'const char* v = std::getenv("QJOULE_FAST_PATH");\n' > "$tree/src/model/graph.cpp"
if out=$(python3 "$checker" "$tree"); then
  echo "FAIL: a getenv of a kernel choice passed: $out"; exit 1
fi
grep -q 'src/model/graph.cpp:1: reads a QJOULE_ variable with getenv' <<<"$out" || { echo "FAIL: $out"; exit 1; }
echo "check-layering: flags an upward include (between the bands of one module too), a folder with no band, a spec parsed below where it enters and a kernel choice read outside the overrides' table; passes a clean tree"
