#!/usr/bin/env bash
# Runs every test: sets up (packages + build), then all unit and end-to-end tests through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
build_dir=${MGT_BUILD_DIR:-build}
cd "$build_dir"
ctest --output-on-failure -j "${MGT_JOBS:-$(nproc)}" "$@"
