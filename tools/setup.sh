#!/usr/bin/env bash
# Installs every Debian package mgt needs (non-interactive, idempotent) and builds it into
# build/ (or $MGT_BUILD_DIR). Safe to run again: it only installs what is missing and rebuilds
# what changed.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake pkg-config
  libsimdjson-dev libcxxopts-dev libicu-dev zlib1g-dev libzstd-dev
  libopenblas-dev libhdf5-dev libsentencepiece-dev mpich libmpich-dev
  libcpp-httplib-dev  # mgt-generate --server
  catch2 python3
  slurmctld slurmd slurm-client munge  # the one-node cluster of tests/e2e/slurm_cluster.sh
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -qq
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The CUDA toolkit is optional; use it when installed even if nvcc is not on PATH.
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi

build_dir=${MGT_BUILD_DIR:-build}
jobs=${MGT_JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build_dir" -j "$jobs" >&2
echo "setup: built into $build_dir/" >&2
