# Finds ONNX Runtime and defines the imported target onnxruntime::onnxruntime.
#
# Order: a distribution package (Debian 13, Ubuntu 24.10+ ship a CMake config) first; else the
# copy that scripts/fetch_onnxruntime.sh unpacks under third_party/onnxruntime (the shared
# library from the npm package onnxruntime-node, the headers from Debian 13's
# libonnxruntime-dev). ONNXRUNTIME_ROOT overrides the fallback location.
find_package(onnxruntime CONFIG QUIET)
if(TARGET onnxruntime::onnxruntime)
  message(STATUS "ONNX Runtime: distribution package (${onnxruntime_DIR})")
  return()
endif()

set(ONNXRUNTIME_ROOT "${CMAKE_SOURCE_DIR}/third_party/onnxruntime" CACHE PATH
    "Folder with include/ and lib/ of ONNX Runtime, used when no package is found")
find_path(ONNXRUNTIME_INCLUDE_DIR onnxruntime_cxx_api.h
          PATHS "${ONNXRUNTIME_ROOT}/include" NO_DEFAULT_PATH)
find_library(ONNXRUNTIME_LIBRARY NAMES onnxruntime libonnxruntime.so.1
             PATHS "${ONNXRUNTIME_ROOT}/lib" NO_DEFAULT_PATH)
if(NOT ONNXRUNTIME_INCLUDE_DIR OR NOT ONNXRUNTIME_LIBRARY)
  message(FATAL_ERROR "ONNX Runtime not found: no CMake package, and nothing under "
                      "${ONNXRUNTIME_ROOT}. Run scripts/setup.sh (or scripts/fetch_onnxruntime.sh).")
endif()
add_library(onnxruntime::onnxruntime SHARED IMPORTED GLOBAL)
set_target_properties(onnxruntime::onnxruntime PROPERTIES
  IMPORTED_LOCATION "${ONNXRUNTIME_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${ONNXRUNTIME_INCLUDE_DIR}")
get_filename_component(_ort_libdir "${ONNXRUNTIME_LIBRARY}" DIRECTORY)
# The binaries find the library where it was unpacked, without LD_LIBRARY_PATH.
list(APPEND CMAKE_BUILD_RPATH "${_ort_libdir}")
message(STATUS "ONNX Runtime: ${ONNXRUNTIME_LIBRARY} (headers ${ONNXRUNTIME_INCLUDE_DIR})")
