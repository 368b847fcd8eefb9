#!/usr/bin/env bash
# The library and the programs take their configuration as typed options built from flags: no
# source under lib/ or bin/ reads or writes the process environment, except the two documented
# places: core/process_environment.cpp (the thread count, a process setting) and
# dist/launch_environment.cpp (what the launcher says about the job). A new getenv elsewhere is
# a switch that no run description records.
# Usage: bash tests/e2e/library_environment.sh BIN_DIR SOURCE_DIR
set -euo pipefail
src=$2
source "$src/tests/e2e/lib/common.bash"

allowed='^(lib/core/process_environment\.cpp|lib/dist/launch_environment\.cpp):'
cd "$src"
found=$(grep -rnE --include='*.cpp' --include='*.hpp' --include='*.cu' --include='*.cuh' \
  '\b(std::|::)?(secure_getenv|getenv|setenv|unsetenv|putenv|clearenv)\s*\(|\benviron\b' lib bin |
  grep -vE "$allowed" || true)
[[ -z "$found" ]] || fail "the environment read or written outside the documented places:
$found"

# The check finds what it is meant to find.
probe=$(printf 'int f() { return std::getenv("X") != nullptr; }\n' |
  grep -cE '\b(std::|::)?(secure_getenv|getenv|setenv|unsetenv|putenv|clearenv)\s*\(' || true)
[[ $probe == 1 ]] || fail "the pattern misses a getenv call"
echo "library environment: read only in the documented places"
