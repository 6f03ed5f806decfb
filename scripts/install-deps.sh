#!/usr/bin/env bash
# Installs, from Debian 12's packages, whatever qjoule's build and tests need and is not yet there.
# Idempotent: when everything is installed it does nothing and needs no network.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config git
  nlohmann-json3-dev libcli11-dev libfmt-dev libutf8proc-dev
  libdnnl-dev ocl-icd-opencl-dev  # dnnl-config.cmake requires OpenCL (its GPU runtime), a Recommends only
  libgtest-dev libgmock-dev libbenchmark-dev
  chromium libjs-chart.js fonts-dejavu-core  # `qjoule report` inlines Chart.js; its browser test runs headless Chromium
  clang-format  # scripts/check-format.sh: the C++ format CI checks (.clang-format)
  clang libclang-rt-14-dev  # scripts/fuzz.sh: the fuzz targets (libFuzzer is in clang's runtime package)
  slurm-wlm munge  # scripts/slurm-local.sh: the one-node Slurm cluster the --slurm tests run on
  python3-numpy  # tools/write_quantized_checkpoint.py: the GPTQ / AWQ / bitsandbytes fixtures the import tests read
  python3-dev pybind11-dev python3-pybind11  # the Python package (python/qjoule, its pybind11 module)
  python3-pytest python3-pandas python3-jsonschema  # its tests: pytest, qjoule.to_pandas, the record schema
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
