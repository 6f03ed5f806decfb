# Sourced in a checkout on a GPU machine (see scripts/pack-prebuilt.sh): unpacks BUNDLE into the
# checkout (the build into its folder, the rest into .prebuilt/), makes the build's absolute paths
# resolve (a link from the folder it was built in to this checkout, and ../shared beside it, where they
# differ: needs write access to their parents), and exports LD_LIBRARY_PATH (the bundle's libraries,
# the CUDA toolkit's cuBLASLt, Debian's libstdc++ only where this machine's lacks GLIBCXX_3.4.30) and
# QJOULE_CHARTJS.
#   source scripts/unpack-prebuilt.sh BUNDLE.tar.xz
_qj_bundle=${1:?usage: source scripts/unpack-prebuilt.sh BUNDLE.tar.xz}
_qj_root=$PWD
rm -rf .prebuilt && mkdir -p .prebuilt/x && tar -xJf "$_qj_bundle" -C .prebuilt/x || return 1
for _qj_dir in .prebuilt/x/build/*; do rm -rf "build/$(basename "$_qj_dir")"; mkdir -p build; mv "$_qj_dir" build/; done
mv .prebuilt/x/prebuilt/* .prebuilt/ && rm -rf .prebuilt/x
_qj_src=$(cat .prebuilt/source-dir.txt)
if [ -e "$_qj_src" ]; then
  [ "$(realpath "$_qj_src")" = "$(realpath "$_qj_root")" ] || {
    echo "unpack-prebuilt: the build was made in $_qj_src, which exists here and is not this checkout: unpack in a checkout there" >&2
    return 1
  }
else
  mkdir -p "$(dirname "$_qj_src")" && ln -s "$_qj_root" "$_qj_src" || return 1
fi
if [ -d .prebuilt/shared ] && [ ! -e "$(dirname "$_qj_src")/shared" ]; then ln -sfn "$_qj_root/.prebuilt/shared" "$(dirname "$_qj_src")/shared"; fi
_qj_lp="$_qj_root/.prebuilt/lib"
# (no pipeline that stops reading early: sourced under `set -o pipefail`, a SIGPIPE would fail it)
_qj_lt=$(find /usr/local/cuda*/ -name 'libcublasLt.so.1*' -print -quit 2>/dev/null || true)
[ -n "$_qj_lt" ] && _qj_lp="$_qj_lp:$(dirname "$_qj_lt")"
_qj_sys=$(ldconfig -p | awk '/libstdc\+\+\.so\.6 / && !found { print $NF; found = 1 }')
grep -q GLIBCXX_3.4.30 "$_qj_sys" 2>/dev/null || _qj_lp="$_qj_lp:$_qj_root/.prebuilt/cxx"
export LD_LIBRARY_PATH="$_qj_lp${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
[ -f .prebuilt/chart.min.js ] && export QJOULE_CHARTJS="$_qj_root/.prebuilt/chart.min.js"
echo "unpack-prebuilt: build/ from $_qj_bundle; LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
unset _qj_bundle _qj_root _qj_dir _qj_src _qj_lp _qj_lt _qj_sys
