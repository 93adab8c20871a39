#!/usr/bin/env bash
# Builds the Python baseline of the generation benchmark (bench/generation_bench.py): the
# llama-cpp-python 0.3.36 server (`python -m llama_cpp.server`: FastAPI + uvicorn over one
# shared `Llama`), from the same pinned sdist whose vendored llama.cpp tailcut links.
# Benchmark tooling only: the set-up never builds it.
#
#   engine:  vendor/llama.cpp as *shared* libraries (libllama, libggml, libggml-base,
#            libggml-cpu) with exactly scripts/fetch_llama_cpp.sh's CMake options (read from
#            that script, so the two cannot drift) except BUILD_SHARED_LIBS=ON: Release,
#            GGML_NATIVE=ON, GGML_OPENMP=OFF, CPU only. Installed with an $ORIGIN rpath.
#   package: the sdist's own `llama_cpp/` (ctypes bindings and the server), unpacked as is,
#            the libraries under llama_cpp/lib/ where its loaders look (llama_cpp.py also
#            honours LLAMA_CPP_LIB_PATH; _ggml.py only looks there). Not pip-installed: the
#            sdist's scikit-build wheel would build the same tree plus mtmd (multimodal),
#            which the benchmark does not use.
#   Python:  the sdist's runtime dependencies and its [server] extra, pinned below, into the
#            benchmark virtualenv (.venv-bench).
#
# Run it:  PYTHONPATH=OUT LLAMA_CPP_LIB_PATH=OUT/llama_cpp/lib .venv-bench/bin/python \
#            -m llama_cpp.server --model M.gguf --n_threads 1 ...
# 22 minutes here (2 cores, nice 19, -j2, load average 9-12 from other builds: 6 CPU-minutes;
# the same libraries as tailcut's build, about 10 minutes on a quieter machine).
#
# Usage: bench/build_llama_cpp_python.sh [OUT]   (default: <repo>/build-llama-cpp-python)
#        Environment: PIP (default <repo>/.venv-bench/bin/pip), JOBS (2).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="${1:-$ROOT/build-llama-cpp-python}"
CACHE="${TAILCUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tailcut}"
PIP="${PIP:-$ROOT/.venv-bench/bin/pip}"
FETCH="$ROOT/scripts/fetch_llama_cpp.sh"
VERSION="$(sed -n 's/^LLAMA_CPP_PYTHON_VERSION=//p' "$FETCH")"
SHA256="$(sed -n 's/^LLAMA_CPP_PYTHON_SHA256=//p' "$FETCH")"
LLAMA_CPP_COMMIT="$(sed -n 's/^LLAMA_CPP_COMMIT=//p' "$FETCH")"
SDIST="$CACHE/dl/llama_cpp_python-$VERSION.tar.gz"
# fetch_llama_cpp.sh downloads and checks the sdist (and builds tailcut's libllama) first.
[[ -f $SDIST ]] || "$FETCH"
echo "$SHA256  $SDIST" | sha256sum -c --quiet - || { echo "sha256 mismatch: $SDIST" >&2; exit 1; }

# tailcut's options, shared instead of static.
eval "$(sed -n '/^CMAKE_ARGS=(/,/^)/p' "$FETCH")"
CMAKE_ARGS=("${CMAKE_ARGS[@]/-DBUILD_SHARED_LIBS=OFF/-DBUILD_SHARED_LIBS=ON}")
[[ " ${CMAKE_ARGS[*]} " == *" -DBUILD_SHARED_LIBS=ON "* ]] ||
  { echo "build_llama_cpp_python: could not read $FETCH's CMAKE_ARGS" >&2; exit 1; }

start=$SECONDS
SRC="$OUT/src"
mkdir -p "$SRC"
if [[ ! -f "$SRC/CMakeLists.txt" ]]; then
  tar -xzf "$SDIST" -C "$SRC" --strip-components=3 "llama_cpp_python-$VERSION/vendor/llama.cpp"
fi
rm -rf "$OUT/llama_cpp"
tar -xzf "$SDIST" -C "$OUT" --strip-components=1 "llama_cpp_python-$VERSION/llama_cpp"
cmake -S "$SRC" -B "$OUT/build" -G Ninja "${CMAKE_ARGS[@]}" \
  -DCMAKE_INSTALL_PREFIX="$OUT/prefix" -DCMAKE_INSTALL_RPATH='$ORIGIN' >/dev/null
nice -n 19 cmake --build "$OUT/build" --parallel "${JOBS:-2}"
cmake --install "$OUT/build" >/dev/null
mkdir -p "$OUT/llama_cpp/lib"
cp -P "$OUT"/prefix/lib/lib*.so* "$OUT/llama_cpp/lib/"
echo "build_llama_cpp_python: libraries built in $((SECONDS - start)) s"

# The sdist's dependencies (pyproject: numpy, typing-extensions, diskcache, jinja2; [server]:
# uvicorn, fastapi, pydantic-settings, sse-starlette, starlette-context<0.4, PyYAML), pinned.
# numpy, typing-extensions, uvicorn, fastapi and PyYAML are already in .venv-bench.
"$PIP" install -q --disable-pip-version-check diskcache==5.6.3 jinja2==3.1.6 \
  pydantic-settings==2.16.3 sse-starlette==3.7.0 starlette-context==0.3.6
PYTHONPATH="$OUT" LLAMA_CPP_LIB_PATH="$OUT/llama_cpp/lib" "$(dirname "$PIP")/python" -c \
  'import llama_cpp, llama_cpp.server.app; print("llama_cpp", llama_cpp.__version__, "imports")'
echo "build_llama_cpp_python: $OUT (in $((SECONDS - start)) s)"
