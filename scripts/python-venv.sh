#!/usr/bin/env bash
# The Python package as a user installs it: a fresh virtual environment VENV (Debian's python3, seeing
# Debian's packages: setuptools, wheel, pytest, pandas), `pip install --no-build-isolation .` into it, and
# the wheel that `pip wheel` leaves installed into a second one (VENV-wheel), each imported once. Offline.
#   scripts/python-venv.sh VENV [BUILD_DIR]
# BUILD_DIR: an existing CMake build to take the native module from (CI: build/release, already built);
# without it setup.py configures and builds build/pip (the CPU build of the module's libraries).
# run-tests.sh then runs the Python tests with VENV/bin/python (QJOULE_TEST_PYTHON), not PYTHONPATH.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="$(realpath -m "${1:?usage: scripts/python-venv.sh VENV [BUILD_DIR]}")"
build="${2:-}"
python=/usr/bin/python3  # Debian's: the interpreter whose python3-wheel / -setuptools the build uses
export QJOULE_CMAKE_BUILD_DIR="$build"
rm -rf "$venv" "$venv-wheel"
"$python" -m venv --system-site-packages "$venv"
"$venv/bin/pip" install -q --no-build-isolation --no-deps .
check='import qjoule, sys; assert qjoule.__file__.startswith(sys.prefix), qjoule.__file__; qjoule.sensors(); print("  import qjoule:", qjoule.__file__)'
(cd / && "$venv/bin/python" -c "$check")
wheels="$(mktemp -d)"
trap 'rm -rf "$wheels"' EXIT
"$venv/bin/pip" wheel -q --no-build-isolation --no-deps -w "$wheels" .
"$python" -m venv --system-site-packages "$venv-wheel"
"$venv-wheel/bin/pip" install -q --no-deps "$wheels"/qjoule-*.whl
echo "  the wheel: $(basename "$wheels"/qjoule-*.whl)"
(cd / && "$venv-wheel/bin/python" -c "$check")
