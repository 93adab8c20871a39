#!/usr/bin/env bash
# Builds llama.cpp's own server (tools/server, `llama-server`) from the same pinned source that
# tailcut links (the llama-cpp-python 0.3.36 sdist, scripts/fetch_llama_cpp.sh), for the
# side-by-side generation benchmark (bench/generation_bench.py). Benchmark tooling only: the
# set-up never builds it. Same CPU options as tailcut's libllama (native, no OpenMP, static);
# no web UI, no network features.
#
# About 25 minutes on 2 cores shared with other work (common/ and the server are most of it).
#
# Usage: bench/build_llama_server.sh [OUT]   (default: <repo>/build-llama-server; the binary is
#        OUT/bin/llama-server)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/build-llama-server}"
CACHE="${TAILCUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tailcut}"
VERSION="$(sed -n 's/^LLAMA_CPP_PYTHON_VERSION=//p' "$ROOT/scripts/fetch_llama_cpp.sh")"
COMMIT="$(sed -n 's/^LLAMA_CPP_COMMIT=//p' "$ROOT/scripts/fetch_llama_cpp.sh")"
SDIST="$CACHE/dl/llama_cpp_python-$VERSION.tar.gz"
# fetch_llama_cpp.sh downloads and checks the sdist (and builds tailcut's libllama) first.
[[ -f $SDIST ]] || "$ROOT/scripts/fetch_llama_cpp.sh"
SRC="$OUT/src"
mkdir -p "$SRC"
if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
  tar -xzf "$SDIST" -C "$SRC" --strip-components=3 "llama_cpp_python-$VERSION/vendor/llama.cpp"
fi
# The same CPU kernels as tailcut's libllama: no AMX (scripts/fetch_llama_cpp.sh says why).
cmake -S "$SRC" -B "$OUT/build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
  -DGGML_NATIVE=ON -DGGML_OPENMP=OFF -DGGML_CCACHE=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_APP=OFF \
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
  -DLLAMA_BUILD_COMMIT="${COMMIT:0:7}" -DLLAMA_BUILD_NUMBER=0 \
  "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" \
  "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16" >/dev/null
nice -n 19 cmake --build "$OUT/build" --parallel "${JOBS:-2}" --target llama-server
mkdir -p "$OUT/bin"
cp "$OUT/build/bin/llama-server" "$OUT/bin/llama-server"
echo "build_llama_server: $OUT/bin/llama-server"
