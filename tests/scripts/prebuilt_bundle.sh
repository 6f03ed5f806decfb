#!/usr/bin/env bash
# scripts/pack-prebuilt.sh and scripts/unpack-prebuilt.sh in a scratch checkout: the bundle carries the
# build's executables, ctest's files and the libraries they load; unpacked in the checkout it was made
# in, qjoule runs from it on the bundled libraries; unpacked elsewhere while that checkout exists, one
# line says where to unpack it; bad arguments are the usage line.
set -euo pipefail
trap 'echo "prebuilt_bundle.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
repo="$1"
build="$2"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
co="$work/checkout"
mkdir -p "$co/scripts" "$co/build/fake/src/cli" "$co/build/fake/tests/x"
cp "$repo/scripts/pack-prebuilt.sh" "$repo/scripts/unpack-prebuilt.sh" "$co/scripts/"
cp "$build/src/cli/qjoule" "$co/build/fake/src/cli/"
echo 'subdirs("tests/x")' > "$co/build/fake/CTestTestfile.cmake"
printf 'add_test(Alpha.one "%s")\nadd_test(Beta.two "%s")\n' "$co/build/fake/tests/x/alpha" "$co/build/fake/tests/x/beta" \
  > "$co/build/fake/tests/x/CTestTestfile.cmake"
printf '#!/bin/true\n' > "$co/build/fake/tests/x/alpha"
printf '#!/bin/true\n' > "$co/build/fake/tests/x/beta"
printf 'a library a test loads\n' > "$co/build/fake/tests/x/libfake.so"
chmod +x "$co/build/fake/tests/x/alpha" "$co/build/fake/tests/x/beta" "$co/build/fake/tests/x/libfake.so"
echo 'not part of the bundle' > "$co/build/fake/tests/x/object.o"
if QJOULE_PACK_XZ_PRESET=fast bash "$co/scripts/pack-prebuilt.sh" "$work/b.tar.xz" --build-dir build/fake 2> "$work/err"; then exit 1; fi
grep -q "^pack-prebuilt: QJOULE_PACK_XZ_PRESET='fast': expected 0-9, optionally followed by e" "$work/err"
# The fastest preset from here on: the bundle's content is what is tested, not its size.
export QJOULE_PACK_XZ_PRESET=0
if bash "$co/scripts/pack-prebuilt.sh" 2> "$work/err"; then echo "no bundle name accepted"; exit 1; fi
grep -q '^usage: scripts/pack-prebuilt.sh BUNDLE.tar.xz' "$work/err"
if bash "$co/scripts/pack-prebuilt.sh" "$work/b.tar.xz" --build-dir build/none 2> "$work/err"; then exit 1; fi
grep -q '^pack-prebuilt: no build/none/src/cli/qjoule: build first' "$work/err"
bash "$co/scripts/pack-prebuilt.sh" "$work/b.tar.xz" --build-dir build/fake
listing=$(xz -dc "$work/b.tar.xz" | tar -t)
for f in ./build/fake/src/cli/qjoule ./build/fake/tests/x/CTestTestfile.cmake ./prebuilt/source-dir.txt ./prebuilt/lib/libdnnl.so.2 ./prebuilt/lib/libfmt.so.9; do
  grep -qx "$f" <<< "$listing" || { echo "missing from the bundle: $f"; exit 1; }
done
if grep -q 'object.o\|libc.so' <<< "$listing"; then echo "the bundle holds object files or the C library"; exit 1; fi
grep -qx ./build/fake/tests/x/beta <<< "$listing" || { echo "without --tests, a test executable is missing"; exit 1; }
# --tests REGEX: only the executables of the tests it selects.
bash "$co/scripts/pack-prebuilt.sh" "$work/t.tar.xz" --build-dir build/fake --tests 'Alpha'
selected=$(xz -dc "$work/t.tar.xz" | tar -t)
grep -qx ./build/fake/tests/x/alpha <<< "$selected" || { echo "--tests Alpha: alpha missing"; exit 1; }
grep -qx ./build/fake/src/cli/qjoule <<< "$selected" || { echo "--tests Alpha: qjoule missing"; exit 1; }
if grep -qx ./build/fake/tests/x/beta <<< "$selected"; then echo "--tests Alpha: beta packed"; exit 1; fi
grep -qx ./build/fake/tests/x/libfake.so <<< "$selected" || { echo "--tests Alpha: a test's library left out"; exit 1; }
if bash "$co/scripts/pack-prebuilt.sh" "$work/n.tar.xz" --build-dir build/fake --tests 'Gamma' 2> "$work/err"; then exit 1; fi
grep -q "^pack-prebuilt: --tests 'Gamma': ctest lists no test of build/fake that matches" "$work/err"
if bash "$co/scripts/pack-prebuilt.sh" "$work/n.tar.xz" --build-dir build/fake --tests 2> "$work/err"; then exit 1; fi
grep -q '^usage: scripts/pack-prebuilt.sh BUNDLE.tar.xz .*\[--tests REGEX\]' "$work/err"
# Elsewhere, while the checkout it was made in exists: one line.
mkdir -p "$work/other"
if (cd "$work/other" && source "$co/scripts/unpack-prebuilt.sh" "$work/b.tar.xz") 2> "$work/err"; then exit 1; fi
grep -q "^unpack-prebuilt: the build was made in $co, which exists here and is not this checkout" "$work/err"
# In the checkout it was made in: the build back in its folder, qjoule running on the bundled libraries.
rm -rf "$co/build"
(
  cd "$co"
  source scripts/unpack-prebuilt.sh "$work/b.tar.xz"
  [[ ":$LD_LIBRARY_PATH:" == *":$co/.prebuilt/lib:"* ]] || { echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; exit 1; }
  # Captured first: with pipefail, `cmd | grep -q` fails when grep exits before cmd has written all
  # (cmd gets SIGPIPE, status 141): it did, once in a few runs.
  libraries=$(ldd build/fake/src/cli/qjoule)
  grep -q "libdnnl.so.2 => $co/.prebuilt/lib/libdnnl.so.2" <<< "$libraries"
  version=$(build/fake/src/cli/qjoule --version)
  grep -q '^qjoule ' <<< "$version"
  [ -f build/fake/tests/x/CTestTestfile.cmake ]
)
echo "ok"
