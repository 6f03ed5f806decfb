#!/usr/bin/env bash
# The engines a qjoule user would otherwise pick, run beside qjoule on the same model and host, each
# format one qjoule record (an `engine` field naming the peer and its version) in qjoule's results folder:
# `qjoule report OUT` and summary.md then show them beside qjoule's own runs. docs/peers.md has the last
# figures and how they were made.
#
#   bash scripts/build.sh release                  # the qjoule package and CLI the peers import and call
#   qjoule bench --model M --precisions ... --seq 128 --decode-tokens 64 --threads 2 --out OUT \
#       [--text ../shared/data/wikitext2/test.txt --max-tokens 4096]     # qjoule's runs (+ FP32 reference)
#   bash scripts/peers/peers.sh --model M --out OUT [--peers torch,openvino,llamacpp] [--formats ...]
#
# Each peer group lives in its own virtual environment under build/peers/ (PyPI, the pinned versions of
# scripts/peers/requirements-<group>.lock; made once and reused while the lock file is unchanged):
#   torch      transformers FP32 / BF16 and TorchAO int8 weight-only, int8 W8A8 and int4 (peer_torch.py)
#   openvino   OpenVINO FP32, INT8 and INT4 weight compression through optimum-intel / NNCF (peer_openvino.py)
#   llamacpp   llama.cpp's current release through llama-cpp-python, built here (peer_llamacpp.py)
#   gptqmodel  GPTQModel's GPTQ (4 bits, g128, sym) on --calib FILE, its checkpoint then run by qjoule
#              (peer_gptqmodel.py; not in the default --peers: GPTQ of a 1B model on 2 cores takes hours)
# A group that cannot be installed or run leaves failed records naming why (never a crash, never a gap).
# With OUT/kl-base/ holding the FP32 reference of `qjoule bench --text` (or --kl-base FILE), each peer also
# scores that reference's tokens and windows: perplexity, ΔPPL, KL, same-top, as qjoule's records have them.
# Nothing here is a dependency of qjoule's build, binary or CI.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
model="" out="" peers="torch,openvino,llamacpp" formats="" kl_base="" venvs="$root/build/peers" calib=""
prompt=128 decode=64 threads=2 min_time=3 build="$root/build/release"

usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --peers) peers="$2"; shift 2 ;;
    --formats) formats="$2"; shift 2 ;;
    --kl-base) kl_base="$2"; shift 2 ;;
    --calib) calib="$2"; shift 2 ;;
    --prompt-tokens) prompt="$2"; shift 2 ;;
    --decode-tokens) decode="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --min-time) min_time="$2"; shift 2 ;;
    --venvs) venvs="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) usage 0 ;;
    *) echo "peers.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
done
[ -n "$model" ] && [ -n "$out" ] || { echo "peers.sh: --model DIR and --out OUT are required (--help)" >&2; exit 2; }
[ -f "$model/config.json" ] || { echo "peers.sh: --model $model: no config.json, expected a Hugging Face folder" >&2; exit 2; }
build="$(cd "$build" 2>/dev/null && pwd)" || { echo "peers.sh: --build: no such folder" >&2; exit 2; }
[ -f "$build/python/qjoule/__init__.py" ] && [ -x "$build/src/cli/qjoule" ] ||
  { echo "peers.sh: no qjoule build in $build (bash scripts/build.sh release first, or --build DIR)" >&2; exit 2; }
if [ -z "$kl_base" ] && [ -d "$out/kl-base" ]; then
  # The reference `qjoule bench --text` left for this model, if exactly one is there.
  mapfile -t found < <(find "$out/kl-base" -name '*.qjkl' 2>/dev/null)
  [ "${#found[@]}" -eq 1 ] && kl_base="${found[0]}"
fi
export PYTHONPATH="$build/python:$here" QJOULE="$build/src/cli/qjoule"
export OMP_NUM_THREADS="$threads" PYTHONWARNINGS=ignore TF_CPP_MIN_LOG_LEVEL=3
mkdir -p "$venvs" "$out"

# The venv of a group, made from its lock file once (a stamp holds the lock's hash).
venv_of() {
  local group="$1" lock="$here/requirements-$1.lock" dir="$venvs/venv-$1"
  [ -f "$lock" ] || { echo "no lock file $lock"; return 1; }
  local hash; hash="$(sha256sum "$lock" | cut -c1-16)" || return 1
  if [ "$(cat "$dir/.lock-hash" 2>/dev/null)" != "$hash" ]; then
    echo "== making $dir from $(basename "$lock") (PyPI; once)" >&2
    rm -rf "$dir"
    /usr/bin/python3 -m venv "$dir" >&2
    local extra=()
    # llama-cpp-python builds llama.cpp from its sdist: for this CPU, with its own CMake.
    [ "$group" = llamacpp ] && export CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_CURL=OFF" && extra=(--no-binary llama-cpp-python)
    # GPTQModel builds from its sdist: its CPU path only (no CUDA extensions).
    [ "$group" = gptqmodel ] && export BUILD_CUDA_EXT=0
    "$dir/bin/pip" install --no-deps "${extra[@]}" -r "$lock" > "$dir.pip.log" 2>&1 || {
      echo "pip install -r $(basename "$lock") failed: $(grep -m1 -E 'ERROR|error:' "$dir.pip.log" || tail -1 "$dir.pip.log")"
      return 1; }
    echo "$hash" > "$dir/.lock-hash"
  fi
  echo "$dir"
}

# A peer script's FORMATS, comma-separated: read from its source, not imported (its environment may not exist).
formats_of() {
  /usr/bin/python3 -c 'import ast, sys
tree = ast.parse(open(sys.argv[1]).read())
print(",".join(next(ast.literal_eval(n.value) for n in tree.body
                    if isinstance(n, ast.Assign) and n.targets[0].id == "FORMATS")))' "$1"
}

declare -A script=([torch]=peer_torch.py [openvino]=peer_openvino.py [llamacpp]=peer_llamacpp.py
                   [gptqmodel]=peer_gptqmodel.py)
status=0
IFS=, read -r -a groups <<< "$peers"
all_known=""
for group in "${groups[@]}"; do
  [ -n "${script[$group]:-}" ] ||
    { echo "peers.sh: --peers $group: expected torch, openvino, llamacpp or gptqmodel" >&2; exit 2; }
  if [ "$group" = gptqmodel ] && [ -z "$calib" ]; then
    echo "peers.sh: --peers gptqmodel needs --calib FILE (the text qjoule's GPTQ calibrates on)" >&2; exit 2
  fi
  all_known="$all_known,$(formats_of "$here/${script[$group]}")"
done
# Every --formats entry is one of the chosen peers' (a typo would otherwise run nothing, silently).
if [ -n "$formats" ]; then
  for f in ${formats//,/ }; do
    grep -qFx -- "$f" <(tr , '\n' <<< "$all_known") ||
      { echo "peers.sh: --formats $f: not a format of --peers $peers (they have ${all_known#,})" >&2; exit 2; }
  done
fi
for group in "${groups[@]}"; do
  args=(--model "$model" --out "$out" --prompt-tokens "$prompt" --decode-tokens "$decode" --threads "$threads"
        --min-time "$min_time" --work "$venvs/work")
  [ -n "$kl_base" ] && args+=(--kl-base "$kl_base")
  [ "$group" = gptqmodel ] && args+=(--calib "$calib")
  # This group's formats among --formats (all of them without it).
  known="$(formats_of "$here/${script[$group]}")"
  if [ -n "$formats" ]; then
    mine="$(tr , '\n' <<< "$formats" | grep -Fxf <(tr , '\n' <<< "$known") | paste -sd, || true)"
    [ -n "$mine" ] || continue
    args+=(--formats "$mine")
  fi
  echo "== $group" >&2
  if ! dir="$(venv_of "$group")"; then
    # Nothing of this group could run: a failed record per format, written by Debian's Python and this build.
    /usr/bin/python3 - "$known" "$group" "$dir" "${args[@]}" <<'EOF' || status=1
import sys
import peer_common as common
known, group, why = sys.argv[1].split(","), sys.argv[2], sys.argv[3]
sys.argv = [sys.argv[0]] + sys.argv[4:]
args = common.parse_args(group, known, calibration="--calib" in sys.argv)
for precision in args.formats:
    if not common.already_recorded(args, precision):
        common.record_failure(args, f"{group} (not installed)", precision, why)
EOF
    status=1
    continue
  fi
  "$dir/bin/python" "$here/${script[$group]}" "${args[@]}" || status=1
done
"$build/src/cli/qjoule" report "$out" > /dev/null && echo "== $out/report.html, $out/summary.md" >&2
exit "$status"
