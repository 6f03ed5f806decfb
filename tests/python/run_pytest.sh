#!/usr/bin/env bash
# One Python test file under ctest: with QJOULE_TEST_PYTHON (run-tests.sh sets it to the virtual
# environment scripts/python-venv.sh installed qjoule into) that interpreter and its installed package,
# PYTHONPATH unset; otherwise Debian's python3 on this build's package (PYTHONPATH, set by CMake).
#   tests/python/run_pytest.sh TEST_FILE
set -euo pipefail
if [ -n "${QJOULE_TEST_PYTHON:-}" ]; then
  unset PYTHONPATH
  echo "python tests: the qjoule that pip installed for $QJOULE_TEST_PYTHON"
  exec "$QJOULE_TEST_PYTHON" -m pytest -q -p no:cacheprovider "$1"
fi
echo "python tests: the package of this build on PYTHONPATH=$PYTHONPATH"
exec /usr/bin/python3 -m pytest -q -p no:cacheprovider "$1"
