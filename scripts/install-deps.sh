#!/usr/bin/env bash
# Installs, from Debian 12's packages, whatever qjoule's build and tests need and is not yet there.
# Idempotent: when everything is installed it does nothing and needs no network.
#   scripts/install-deps.sh           everything: the build, the tests, CI's checks (run-tests.sh)
#   scripts/install-deps.sh --build   what configuring build/release, building the qjoule binary and running
#                                     it need (run-benchmark.sh): not the browser, clang, Slurm or pandas
#                                     that only the tests and CI's checks use
set -euo pipefail
build_packages=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libcli11-dev libfmt-dev libutf8proc-dev
  libopenblas-openmp-dev  # GPTQ's Cholesky factorisation and GEMMs (LAPACK / BLAS, OpenMP build)
  libdnnl-dev ocl-icd-opencl-dev  # dnnl-config.cmake requires OpenCL (its GPU runtime), a Recommends only
  libgtest-dev libgmock-dev libbenchmark-dev  # build/release's configuration finds them (tests, microbenchmarks)
  python3-dev pybind11-dev python3-pybind11  # and pybind11 (the Python package is part of build/release)
  python3-venv python3-pip python3-setuptools python3-wheel  # `pip install --no-build-isolation .`, offline
  libjs-chart.js  # `qjoule bench` and `qjoule report` inline Chart.js into report.html
)
case "${1:-}" in
  "" | --build) ;;
  *) echo "usage: scripts/install-deps.sh [--build]" >&2; exit 2 ;;
esac
packages=("${build_packages[@]}")
[ "${1:-}" = --build ] || packages+=(
  chromium fonts-dejavu-core  # the report's browser test runs headless Chromium
  clang-format  # scripts/check-format.sh: the C++ format CI checks (.clang-format)
  clang libclang-rt-14-dev  # scripts/fuzz.sh: the fuzz targets (libFuzzer is in clang's runtime package)
  slurm-wlm munge  # scripts/slurm-local.sh: the one-node Slurm cluster the --slurm tests run on
  python3-numpy  # tools/write_quantized_checkpoint.py: the GPTQ / AWQ / bitsandbytes fixtures the import tests read
  python3-regex  # tools/score_task_reference.py (through the reference BPE): the scorer `qjoule score` is checked against
  python3-pytest python3-pandas python3-jsonschema  # the Python package's tests: pytest, qjoule.to_pandas, the record schema
)
missing=()
for p in "${packages[@]}"; do
  [[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" == *"install ok installed"* ]] || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
