#!/usr/bin/env bash
# scripts/peers/peers.sh's bad arguments, each one line naming it and exit 2, before any virtual
# environment is made (nothing here reaches PyPI): an unknown flag, no --model or --out, a folder without
# config.json, a peer group that does not exist, a format no chosen peer has, GPTQModel without a
# calibration text, no qjoule build; and a group whose environment cannot be made is a failed record.
#   tests/scripts/test_peers_arguments.sh REPO BUILD_DIR
set -euo pipefail
repo="$1"
build="$2"
peers="$repo/scripts/peers/peers.sh"
model="$repo/tests/fixtures/decoders/trained-llama"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
expect() {  # expect "message" args...: exit 2 and exactly that one line on stderr
  local want="$1"
  shift
  local got status=0
  got=$(bash "$peers" "$@" 2>&1 >/dev/null) || status=$?
  [ "$status" = 2 ] || { echo "FAIL: peers.sh $*: exit $status, expected 2"; exit 1; }
  [ "$got" = "$want" ] || { echo "FAIL: peers.sh $*: '$got', expected '$want'"; exit 1; }
}
expect "peers.sh: unknown argument '--bogus' (--help lists them)" --bogus
expect "peers.sh: --model DIR and --out OUT are required (--help)" --model "$model"
expect "peers.sh: --model $out: no config.json, expected a Hugging Face folder" --model "$out" --out "$out/r"
expect "peers.sh: --build: no such folder" --model "$model" --out "$out/r" --build "$out/none"
expect "peers.sh: no qjoule build in $out (bash scripts/build.sh release first, or --build DIR)" \
  --model "$model" --out "$out/r" --build "$out"
expect "peers.sh: --peers tensorrt: expected torch, openvino, llamacpp or gptqmodel" \
  --model "$model" --out "$out/r" --build "$build" --peers tensorrt
expect "peers.sh: --peers gptqmodel needs --calib FILE (the text qjoule's GPTQ calibrates on)" \
  --model "$model" --out "$out/r" --build "$build" --peers gptqmodel
expect "peers.sh: --formats llamacpp-q3_k: not a format of --peers llamacpp (they have llamacpp-f16,llamacpp-q8_0,llamacpp-q4_0,llamacpp-q4_k_m)" \
  --model "$model" --out "$out/r" --build "$build" --peers llamacpp --formats llamacpp-q4_0,llamacpp-q3_k
# A group whose environment cannot be made (here: its lock file gone) leaves a failed record per format,
# naming why, and peers.sh exits 1; nothing reaches PyPI.
cp -r "$repo/scripts/peers" "$out/peers"
rm "$out/peers/requirements-llamacpp.lock"
status=0
bash "$out/peers/peers.sh" --model "$model" --out "$out/r" --build "$build" --venvs "$out/venvs" --peers llamacpp \
  --formats llamacpp-q4_0 > /dev/null 2>&1 || status=$?
[ "$status" = 1 ] || { echo "FAIL: a group without its environment: exit $status, expected 1"; exit 1; }
python3 - "$out/r/results.jsonl" <<'PY'
import json, sys
[r] = [json.loads(line) for line in open(sys.argv[1])]
assert r["status"] == "failed" and r["precision"] == "llamacpp-q4_0", r
assert r["engine"] == "llamacpp (not installed)" and r["error"].startswith("no lock file "), r
PY
bash "$peers" --help | grep -q "^The engines a qjoule user would otherwise pick" ||
  { echo "FAIL: --help does not open with what peers.sh does"; exit 1; }
echo "peers.sh: every bad argument is one line and exit 2"
