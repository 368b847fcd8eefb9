#!/usr/bin/env bash
# tools/check_layering.cmake refuses, naming each offending file and include: an upward include
# in lib/, and an include of a backend's internals (kernels/cpu/, kernels/cuda/) from lib/ outside
# lib/kernels, from bin/, and from tests/ outside tests/kernels and tests/cuda; the same tree
# without them passes, as does a listed exception.
# Usage: bash tests/e2e/layering_check.sh BIN_DIR SOURCE_DIR
set -euo pipefail
src=$2
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT

check() {
  cmake -DSOURCE_DIR="$tree" "-DLAYER_ALLOWS=core=core|kernels=core kernels|model=core kernels model" \
    -DDIST_CORE_NAMES= "-DPRIVATE_INCLUDE_EXCEPTIONS=${1:-}" -P "$src/tools/check_layering.cmake" 2>&1
}

mkdir -p "$tree"/lib/{core,kernels/cpu,kernels/cuda,model} "$tree"/bin "$tree"/tests/{model,kernels,cuda}
touch "$tree"/lib/kernels/backend.hpp "$tree"/lib/kernels/cpu/cpu_backend.hpp "$tree"/lib/kernels/cuda/device.hpp
printf '#include "kernels/backend.hpp"\n' > "$tree"/lib/model/model.cpp
printf '#include "kernels/cpu/cpu_backend.hpp"\n' > "$tree"/lib/kernels/backend_factory.cpp
printf '#include "kernels/cpu/cpu_backend.hpp"\n' > "$tree"/tests/kernels/test_cpu.cpp
printf '#include "kernels/cuda/device.hpp"\n' > "$tree"/tests/cuda/test_cuda.cpp
printf '#include "model/model.hpp"\n' > "$tree"/bin/mgt-x.cpp
out=$(check) || { echo "FAIL: a clean tree was refused:"; echo "$out"; exit 1; }
echo "ok: a clean tree passes"

printf '#include "model/model.hpp"\n' > "$tree"/lib/kernels/upward.cpp
printf '#include "kernels/cpu/cpu_backend.hpp"\n' > "$tree"/lib/model/private.cpp
printf '#include "kernels/cuda/device.hpp"\n' > "$tree"/bin/mgt-y.cpp
printf '  #  include "kernels/cpu/cpu_backend.hpp"\n' > "$tree"/tests/model/test_private.cpp
if out=$(check); then
  echo "FAIL: violations passed the check"
  exit 1
fi
for want in 'lib/kernels/upward.cpp \(kernels\) includes model/model.hpp \(model\)' \
            'lib/model/private.cpp includes kernels/cpu/cpu_backend.hpp' \
            'bin/mgt-y.cpp includes kernels/cuda/device.hpp' \
            'tests/model/test_private.cpp includes kernels/cpu/cpu_backend.hpp'; do
  grep -Eq -- "$want" <<<"$out" || { echo "FAIL: no line matching '$want' in:"; echo "$out"; exit 1; }
done
if grep -q 'tests/kernels/test_cpu.cpp\|tests/cuda/test_cuda.cpp\|backend_factory.cpp' <<<"$out"; then
  echo "FAIL: the kernels' own files were refused:"; echo "$out"; exit 1
fi
echo "ok: every violation is named, the kernels' own files are not"

rm "$tree"/lib/kernels/upward.cpp "$tree"/lib/model/private.cpp "$tree"/bin/mgt-y.cpp
out=$(check tests/model/test_private.cpp) || { echo "FAIL: a listed exception was refused:"; echo "$out"; exit 1; }
echo "ok: a listed exception passes"
