#!/usr/bin/env bash
# Installs what is missing, checks the C++ format (scripts/check-format.sh) and that no module includes
# a module above it (scripts/check-layering.py), builds qjoule twice
# (release with -Werror and the CUDA backend where nvcc is found, and ASan+UBSan without it: both
# configurations), installs the Python package with pip into a fresh virtual environment (and its wheel
# into another; scripts/python-venv.sh), runs the whole suite under ctest in both (the Python tests on
# the installed package), then
# runs each fuzz target (scripts/fuzz.sh) for 20 s.
# Exits non-zero if any build, test or fuzz target fails.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
# Each step's header says when it began, so that a slow CI run shows which step took the time.
phase() { echo "== $1 (at $(( $(date +%s) - start )) s) =="; }
bash scripts/install-deps.sh
status=0

phase "format (.clang-format)"
bash scripts/check-format.sh || status=1

phase "layering (no module includes one listed below it in docs/architecture.md)"
python3 scripts/check-layering.py || status=1

phase "release build"
bash scripts/build.sh release
phase "Python package: pip install . and its wheel, each into a fresh virtual environment"
venv_ok=1
bash scripts/python-venv.sh build/release/venv build/release || { status=1; venv_ok=0; }
phase "release tests (the Python tests on the package pip installed)"
if [ "$venv_ok" = 1 ]; then export QJOULE_TEST_PYTHON="$PWD/build/release/venv/bin/python"; fi
ctest --test-dir build/release -j "$(nproc)" --output-on-failure || status=1
unset QJOULE_TEST_PYTHON

phase "sanitizer (ASan+UBSan) build"
bash scripts/build.sh asan
phase "sanitizer tests"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --test-dir build/asan -j "$(nproc)" --output-on-failure -LE no-sanitizer || status=1

phase "fuzz targets (libFuzzer, ASan+UBSan), 20 s each, side by side"
bash scripts/fuzz.sh 20 || status=1

echo "run-tests: finished in $(( $(date +%s) - start )) s, status $status"
exit $status
