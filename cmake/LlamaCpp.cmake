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
