#!/usr/bin/env bash
# Configures mgt against Debian's own FindCUDAToolkit.cmake, as a fresh Debian install has it.
# A machine's copy may carry a local fix; Debian 12's (CMake 3.25) sets a property on
# CUDA::nvToolsExt whenever the project's minimum CMake version is 3.25 or later, and CUDA 13
# ships no libnvToolsExt, so that configuration stops ("set_property could not find TARGET
# CUDA::nvToolsExt") unless the project keeps its minimum below 3.25.
# The module comes from Debian's cmake-data package (apt-get download: the version installed, else
# the candidate); configure only, nothing is built.
# Exits 77 (skipped) without a CUDA compiler or when the package cannot be had (no apt-get,
# no network).
# Usage: bash tools/check_stock_cuda_module.sh SOURCE_DIR CMAKE [CUDA_COMPILER]
set -euo pipefail
src=$1
cmake=$2
nvcc=${3:-}
skip() { echo "SKIP: $*"; exit 77; }

[[ -n $nvcc && -x $nvcc ]] || skip "no CUDA compiler: the build has no CUDA backend"
command -v apt-get >/dev/null && command -v dpkg-deb >/dev/null || skip "no apt-get or dpkg-deb to fetch Debian's cmake-data"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
installed=$(dpkg-query -W -f='${Version}' cmake-data 2>/dev/null || true)
package=cmake-data${installed:+=$installed}
# apt-get downloads as the unprivileged _apt user where it can: let it write there.
chmod 777 "$work"
if ! (cd "$work" && apt-get download "$package" > download.txt 2>&1); then
  skip "could not download $package: $(grep -m1 -E '^(E|Err):' "$work/download.txt" || tail -n 1 "$work/download.txt")"
fi
dpkg-deb -x "$work"/cmake-data_*.deb "$work/package"
stock=$(find "$work/package/usr/share" -path '*/Modules/FindCUDAToolkit.cmake' | head -n 1)
[[ -n $stock ]] || { echo "FAIL: $package holds no FindCUDAToolkit.cmake" >&2; exit 1; }
# The whole module directory: the module includes its neighbours (FindPackageHandleStandardArgs).
modules=$(dirname "$stock")
mine=$("$cmake" --system-information 2>/dev/null | sed -n 's/^CMAKE_ROOT "\(.*\)"$/\1/p')/Modules/FindCUDAToolkit.cmake
if [[ -f $mine ]] && ! cmp -s "$stock" "$mine"; then
  echo "this machine's FindCUDAToolkit.cmake differs from $package's; configuring with $package's"
fi

if ! "$cmake" -S "$src" -B "$work/build" -DCMAKE_MODULE_PATH="$modules" -DCMAKE_CUDA_COMPILER="$nvcc" \
    -G "Unix Makefiles" -DBUILD_TESTING=OFF -DCMAKE_BUILD_TYPE=Release > "$work/configure.txt" 2>&1; then
  grep -A 4 'CMake Error' "$work/configure.txt" >&2 || tail -n 30 "$work/configure.txt" >&2
  echo "FAIL: mgt does not configure with $package's FindCUDAToolkit.cmake and $("$nvcc" --version | tail -n 1)" >&2
  exit 1
fi
grep -q 'mgt: CUDA found' "$work/configure.txt" ||
  { tail -n 30 "$work/configure.txt" >&2; echo "FAIL: the configuration did not take the CUDA backend" >&2; exit 1; }
grep -q "$stock" "$work/build/CMakeFiles/Makefile.cmake" ||
  { echo "FAIL: the configuration did not read $package's FindCUDAToolkit.cmake" >&2; exit 1; }
echo "mgt configures with $package's FindCUDAToolkit.cmake and $("$nvcc" --version | tail -n 1)"
