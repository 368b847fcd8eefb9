#!/usr/bin/env bash
# Packs mgt's programs and CUDA tests (mgt-tests, and mgt-dist-tests for NCCL), built on this machine, for a GPU machine that has the CUDA
# driver and libraries but not mgt's other dependencies: the binaries, MPICH's launcher, and every
# shared library they load that is not glibc, libstdc++ or CUDA's, into DIR/pack.tar.xz.
#   tools/gpu/pack.sh [BUILD_DIR] [DIR]      (defaults: build-gpu, .devpack)
# tools/gpu/checks.sh runs there from the repository root and unpacks it.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-gpu}
out=${2:-.devpack}
[ -x "$build/bin/mgt-train" ] && [ -x "$build/tests/mgt-tests" ] && [ -x "$build/tests/mgt-dist-tests" ] ||
  { echo "pack.sh: build $build first (cmake --build $build --target mgt-tests mgt-dist-tests mgt-train mgt-eval mgt-generate)" >&2; exit 1; }
rm -rf "$out/stage" && mkdir -p "$out/stage/bin" "$out/stage/lib"
cp -L "$build"/bin/mgt-* "$build/tests/mgt-tests" "$build/tests/mgt-dist-tests" "$out/stage/bin/"
for tool in mpiexec.hydra hydra_pmi_proxy; do
  [ -x "/usr/bin/$tool" ] && cp -L "/usr/bin/$tool" "$out/stage/bin/"
done
system='linux-vdso|ld-linux|/lib(c|m|pthread|dl|rt|resolv)\.so|libstdc\+\+|libgcc_s|/usr/local/cuda|libcu|libnccl|libcudnn|libnvidia'
for f in "$out"/stage/bin/*; do
  ldd "$f" 2>/dev/null | awk '/=>/ {print $3}' | grep -Ev "$system" || true
done | sort -u | while read -r lib; do [ -n "$lib" ] && cp -L "$lib" "$out/stage/lib/"; done
# Symbols are not needed there, and the call's transfer is limited: MPICH's and OpenBLAS's
# libraries alone carry tens of MB of them.
strip --strip-unneeded "$out"/stage/bin/* "$out"/stage/lib/* 2>/dev/null || true
tar -C "$out/stage" -cJf "$out/pack.tar.xz" bin lib
rm -rf "$out/stage"
du -h "$out/pack.tar.xz"
