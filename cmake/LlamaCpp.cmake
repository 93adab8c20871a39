# Finds the llama.cpp libraries that scripts/fetch_llama_cpp.sh builds (static libllama and
# libggml, CPU backend) and defines the imported target llama (with ggml::ggml, ggml::ggml-base
# and ggml::ggml-cpu behind it), from that build's own CMake package files.
#
# Location: third_party/llama.cpp, a link set-up points at the build in the user's cache;
# LLAMA_CPP_ROOT overrides it. There is no fallback and no option to build without it: the
# generative engine is part of tailcut, and a configure that quietly dropped it would only
# fail later, further from the cause.
set(LLAMA_CPP_ROOT "${CMAKE_SOURCE_DIR}/third_party/llama.cpp" CACHE PATH
    "Install prefix of the llama.cpp build (lib/cmake/llama), made by scripts/fetch_llama_cpp.sh")

find_package(llama CONFIG QUIET PATHS "${LLAMA_CPP_ROOT}" NO_DEFAULT_PATH)
if(NOT TARGET llama)
  message(FATAL_ERROR "llama.cpp not found under ${LLAMA_CPP_ROOT} (no lib/cmake/llama). "
                      "Run scripts/setup.sh (or scripts/fetch_llama_cpp.sh), which builds it.")
endif()
if(LLAMA_SHARED_LIB)
  message(FATAL_ERROR "${LLAMA_CPP_ROOT} holds a shared llama.cpp build; tailcut links the "
                      "static one that scripts/fetch_llama_cpp.sh makes.")
endif()
message(STATUS "llama.cpp: ${LLAMA_VERSION} (${LLAMA_BUILD_COMMIT}) in ${LLAMA_CPP_ROOT}")

# llama_common: llama.cpp's common library, for its chat templates (common/chat.h, which
# renders a GGUF's Jinja template as llama-server does; src/engine/chat_template_llama.cc).
# llama's CMake package leaves it out, so fetch_llama_cpp.sh puts its headers in
# include/llama-common/ and the two libraries it needs beside it in lib/.
set(_llama_common_libs llama-common llama-common-base cpp-httplib)
foreach(_lib IN LISTS _llama_common_libs)
  if(NOT EXISTS "${LLAMA_CPP_ROOT}/lib/lib${_lib}.a")
    message(FATAL_ERROR "${LLAMA_CPP_ROOT} has no lib/lib${_lib}.a: a llama.cpp build from "
                        "before tailcut used its common library. Run scripts/fetch_llama_cpp.sh "
                        "(or scripts/setup.sh), which builds one that has it.")
  endif()
  add_library(llama_common_${_lib} STATIC IMPORTED)
  set_target_properties(llama_common_${_lib} PROPERTIES
      IMPORTED_LOCATION "${LLAMA_CPP_ROOT}/lib/lib${_lib}.a")
endforeach()
find_package(Threads REQUIRED)
add_library(llama_common INTERFACE)
target_link_libraries(llama_common INTERFACE llama_common_llama-common
    llama_common_llama-common-base llama_common_cpp-httplib llama Threads::Threads)
