# Fails when a file includes a header its place may not:
#  - a file of lib/ a header of a layer above its own (LAYER_ALLOWS);
#  - a file of lib/ outside lib/kernels, of bin/, or of tests/ outside tests/kernels and
#    tests/cuda (which test the kernels themselves) a header of kernels/cpu/ or kernels/cuda/:
#    the backends' internals, reached only through kernels/backend.hpp, the backend factory and
#    the other public headers of lib/kernels/.
#   cmake -DSOURCE_DIR=... -DLAYER_ALLOWS="layer=below...|..." -DDIST_CORE_NAMES="a|b"
#         [-DPRIVATE_INCLUDE_EXCEPTIONS="tests/dir/file.cpp|..."] -P check_layering.cmake
# LAYER_ALLOWS, DIST_CORE_NAMES and PRIVATE_INCLUDE_EXCEPTIONS come from lib/CMakeLists.txt,
# which links the layers in the same order; '|' separates entries because ';' does not survive a
# command line.
cmake_policy(VERSION 3.25)
set(LIB_DIR "${SOURCE_DIR}/lib")
string(REPLACE "|" ";" allows "${LAYER_ALLOWS}")
string(REPLACE "|" ";" dist_core_names "${DIST_CORE_NAMES}")
string(REPLACE "|" ";" private_include_exceptions "${PRIVATE_INCLUDE_EXCEPTIONS}")
foreach(entry ${allows})
  string(REGEX MATCH "^([a-z_]+)=(.*)$" _ "${entry}")
  string(REPLACE " " ";" below "${CMAKE_MATCH_2}")
  set(allowed_${CMAKE_MATCH_1} ${below})
endforeach()

# The layer of lib/DIR/NAME: dist/ splits in two, and the side targets' sources are named alone.
function(layer_of dir name out)
  get_filename_component(stem "${name}" NAME_WE)
  if(dir STREQUAL "dist")
    if(stem IN_LIST dist_core_names)
      set(${out} dist_core PARENT_SCOPE)
    else()
      set(${out} dist PARENT_SCOPE)
    endif()
  elseif(dir STREQUAL "train" AND stem STREQUAL "train_launch")
    set(${out} train_launch PARENT_SCOPE)
  else()
    set(${out} ${dir} PARENT_SCOPE)
  endif()
endfunction()

set(violations "")

# 1. lib/ includes only downward.
file(GLOB_RECURSE files RELATIVE "${LIB_DIR}" "${LIB_DIR}/*.cpp" "${LIB_DIR}/*.hpp" "${LIB_DIR}/*.cu"
  "${LIB_DIR}/*.cuh")
foreach(file ${files})
  if(NOT file MATCHES "^([a-z_]+)/")
    continue()
  endif()
  set(dir ${CMAKE_MATCH_1})
  get_filename_component(name "${file}" NAME)
  layer_of(${dir} ${name} layer)
  if(NOT DEFINED allowed_${layer})
    string(APPEND violations "  lib/${file}: directory ${dir} is in no layer of lib/CMakeLists.txt\n")
    continue()
  endif()
  file(STRINGS "${LIB_DIR}/${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"[a-z_]+/")
  foreach(line ${includes})
    string(REGEX MATCH "\"([a-z_]+)/([^\"]+)\"" _ "${line}")
    set(target_dir ${CMAKE_MATCH_1})
    get_filename_component(target_name "${CMAKE_MATCH_2}" NAME)
    if(NOT EXISTS "${LIB_DIR}/${target_dir}")
      continue()  # not a header of lib/
    endif()
    layer_of(${target_dir} ${target_name} target_layer)
    if(NOT target_layer IN_LIST allowed_${layer})
      string(APPEND violations "  lib/${file} (${layer}) includes ${target_dir}/${CMAKE_MATCH_2} (${target_layer})\n")
    endif()
  endforeach()
endforeach()

# 2. The backends' internals stay inside lib/kernels (and the tests of the kernels).
file(GLOB_RECURSE files RELATIVE "${SOURCE_DIR}"
  "${SOURCE_DIR}/lib/*.cpp" "${SOURCE_DIR}/lib/*.hpp" "${SOURCE_DIR}/lib/*.cu" "${SOURCE_DIR}/lib/*.cuh"
  "${SOURCE_DIR}/bin/*.cpp" "${SOURCE_DIR}/bin/*.hpp"
  "${SOURCE_DIR}/tests/*.cpp" "${SOURCE_DIR}/tests/*.hpp" "${SOURCE_DIR}/tests/*.cu")
foreach(file ${files})
  if(file MATCHES "^(lib/kernels|tests/kernels|tests/cuda)/" OR file IN_LIST private_include_exceptions)
    continue()
  endif()
  file(STRINGS "${SOURCE_DIR}/${file}" includes REGEX "^[ \t]*#[ \t]*include[ \t]*\"kernels/(cpu|cuda)/")
  foreach(line ${includes})
    string(REGEX MATCH "\"([^\"]+)\"" _ "${line}")
    string(APPEND violations "  ${file} includes ${CMAKE_MATCH_1}, a backend's internals (use lib/kernels/'s public headers)\n")
  endforeach()
endforeach()

if(violations)
  message(FATAL_ERROR "includes against the layer order of lib/CMakeLists.txt:\n${violations}")
endif()
