#!/usr/bin/env bash
# Builds the llama.cpp libraries (libllama + libggml, CPU backend, and libllama-common for its
# chat templates) that src/engine's generative models link, and points third_party/llama.cpp
# at them. Safe to run again: a build that is already in the cache is only linked.
#
#   source: PyPI's source distribution of llama-cpp-python, which vendors the whole llama.cpp
#           tree under vendor/llama.cpp (submodule commit below), fetched with `pip download`
#           and checked against a pinned sha256. Only vendor/llama.cpp is unpacked.
#   build:  static libraries, Release, CPU backend only, no tools, examples, tests, server,
#           web UI (LLAMA_USE_PREBUILT_UI would download one at build time), CURL or OpenSSL.
#           Static, so the tailcut binary carries the engine and needs no rpath into a cache.
#           Of llama.cpp's common library only the llama-common target is built (no tools use
#           it here): src/engine renders chat prompts with its common_chat_templates_* (the
#           GGUF's own Jinja template, as llama-server does). cmake --install leaves out its
#           headers and its build-info library, so they are copied into include/llama-common/
#           and lib/ by hand; common's download code needs cpp-httplib's library, built and
#           copied too (the linker takes only the objects tailcut's calls reach).
#           GGML_NATIVE=ON (-march=native): the build is for this machine only, so the cache
#           key includes the CPU's feature flags as well as the source hash, the compiler and
#           the options. GGML_OPENMP=OFF: ggml's own thread pool, so neither libgomp's
#           spinning workers nor its uninstrumented runtime (ThreadSanitizer) come along.
#   cache:  ${TAILCUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tailcut}, shared by every clone
#           on the machine: the sdist under dl/, each build under llama.cpp/<version>-<key>/
#           (its install prefix, 27 MB; the build tree is removed once installed). Once per
#           machine: libllama + libggml took 10 minutes on 2 cores shared with other builds
#           (nice 19, -j2), 16 at load 12; libllama-common another 15 at load 12 (31 in all,
#           12 of CPU time). A set-up run that finds it takes no time here. A lock keeps two
#           set-ups (two clones) from building it at once.
#
# Priority: normal by default, since set-up is the job a newcomer is waiting for (at nice 19 it
# took 888 s of a fresh machine's 35-minute `make run`, issue 43); LLAMA_CPP_NICE=19 builds it
# in the background of other work.
#
# Usage: scripts/fetch_llama_cpp.sh
# Environment: PIP (default .venv/bin/pip), JOBS (2), LLAMA_CPP_NICE (0).
set -euo pipefail

LLAMA_CPP_PYTHON_VERSION=0.3.36
LLAMA_CPP_PYTHON_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
# The sdist's vendor/llama.cpp submodule commit: llama.cpp 0.5.0-dev, ggml 0.25.3.
LLAMA_CPP_COMMIT=0c1e57098bba43ac29e6e3b677cdceebdd22334f

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${TAILCUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tailcut}"
PIP="${PIP:-$ROOT/.venv/bin/pip}"
JOBS="${JOBS:-2}"
NICE="${LLAMA_CPP_NICE:-0}"
LINK="$ROOT/third_party/llama.cpp"
log() { echo "llama.cpp: $*"; }
fail() { echo "llama.cpp: $*" >&2; exit 1; }

CMAKE_ARGS=(
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF -DCMAKE_POSITION_INDEPENDENT_CODE=ON
  -DGGML_NATIVE=ON -DGGML_OPENMP=OFF -DGGML_CCACHE=OFF -DGGML_BLAS=OFF -DGGML_BACKEND_DL=OFF
  -DLLAMA_BUILD_COMMON=ON -DLLAMA_SUBPROCESS=OFF -DLLAMA_BUILD_TOOLS=OFF
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF
  -DLLAMA_BUILD_COMMIT="${LLAMA_CPP_COMMIT:0:7}" -DLLAMA_BUILD_NUMBER=0
  # No AMX kernels, although -march=native enables them on a CPU that has AMX (Intel Sapphire
  # Rapids and later): on such a machine (KVM, 2 vCPUs) every decode of SmolLM2's Q4_1 weights
  # crashed in ggml_backend_amx_mul_mat, as in ggml-org/llama.cpp#20824 (closed unfixed).
  # Explicit -mno-* flags win over -march=native's whatever their order. AVX-512 stays.
  "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
)

# The key: what makes one build differ from another on this or another machine.
cpu_flags="$(grep -m1 '^flags' /proc/cpuinfo || true)"
compilers="$(cc --version | head -1; c++ --version | head -1)"
key="$(printf '%s\n' "$LLAMA_CPP_PYTHON_SHA256" "$compilers" "$cpu_flags" "${CMAKE_ARGS[*]}" |
  sha256sum | cut -c1-16)"
PREFIX="$CACHE/llama.cpp/$LLAMA_CPP_PYTHON_VERSION-$key"

link_prefix() {
  mkdir -p "$ROOT/third_party"
  ln -sfn "$PREFIX" "$LINK"
}

if [[ -f "$PREFIX/.complete" ]]; then
  link_prefix
  log "cached build $PREFIX"
  exit 0
fi
mkdir -p "$CACHE/llama.cpp"
exec 9>"$CACHE/llama.cpp/.lock"
flock 9
if [[ -f "$PREFIX/.complete" ]]; then  # Another set-up built it while this one waited.
  link_prefix
  log "cached build $PREFIX"
  exit 0
fi

# Fetch and verify the source distribution.
sdist="$CACHE/dl/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz"
sdist_ok() { echo "$LLAMA_CPP_PYTHON_SHA256  $sdist" | sha256sum -c --quiet - >/dev/null 2>&1; }
if [[ ! -f $sdist ]] || ! sdist_ok; then
  [[ -x $PIP ]] || fail "$PIP not found (scripts/setup.sh creates .venv before this step)"
  log "downloading llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION (sdist, 77 MB) from PyPI"
  mkdir -p "$CACHE/dl"
  rm -f "$sdist"
  # --no-binary for this package only: with :all: pip would also build the build backend
  # (scikit-build-core and its own build dependencies) from source just to read metadata.
  "$PIP" download -q --disable-pip-version-check --no-deps --no-binary llama-cpp-python \
    -d "$CACHE/dl" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" ||
    fail "pip download of llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION failed"
  [[ -f $sdist ]] || fail "pip did not leave $sdist"
  if ! sdist_ok; then
    got="$(sha256sum "$sdist" | cut -d' ' -f1)"
    rm -f "$sdist"
    fail "sha256 mismatch for $sdist: expected $LLAMA_CPP_PYTHON_SHA256, got $got (removed)"
  fi
fi

for tool in cmake ninja cc c++; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/setup.sh installs it)"
done

work="$PREFIX.partial"
rm -rf "$work" "$PREFIX"
mkdir -p "$work"
trap 'rm -rf "$work"' EXIT
log "unpacking vendor/llama.cpp"
tar -xzf "$sdist" -C "$work" --strip-components=3 \
  "llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp" ||
  fail "could not unpack vendor/llama.cpp from $sdist"

log "building libllama, libggml and libllama-common (CPU, Release, -j$JOBS, nice $NICE; 7-30 minutes, once)"
start=$SECONDS
blog="$work/build.log"
build() { nice -n "$NICE" cmake --build "$work/build" --parallel "$JOBS" --target "$@"; }
install_common() {  # What cmake --install leaves out of llama-common (see the top).
  mkdir -p "$PREFIX/include/llama-common/jinja" &&
  cp "$work"/common/*.h "$PREFIX/include/llama-common/" &&
  cp "$work"/common/jinja/*.h "$PREFIX/include/llama-common/jinja/" &&
  cp "$work/build/common/libllama-common-base.a" \
     "$work/build/vendor/cpp-httplib/libcpp-httplib.a" "$PREFIX/lib/"
}
if ! { cmake -S "$work" -B "$work/build" -G Ninja -DCMAKE_INSTALL_PREFIX="$PREFIX" \
         "${CMAKE_ARGS[@]}" &&
       build llama && common_start=$SECONDS &&
       build llama-common && log "libllama-common took $((SECONDS - common_start)) s" &&
       cmake --install "$work/build" && install_common; } >"$blog" 2>&1; then
  tail -n 30 "$blog" >&2
  cp "$blog" "$CACHE/llama.cpp-build-failed.log"
  rm -rf "$PREFIX"
  fail "build failed; the last lines are above, the whole log is $CACHE/llama.cpp-build-failed.log"
fi
cp "$work/LICENSE" "$PREFIX/LICENSE.llama.cpp"
echo "$LLAMA_CPP_COMMIT" >"$PREFIX/COMMIT"
touch "$PREFIX/.complete"
link_prefix
log "built in $((SECONDS - start)) s into $PREFIX ($(grep -o 'libllama-common took [0-9]* s' "$blog"))"
