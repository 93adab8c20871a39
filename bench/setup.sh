#!/usr/bin/env bash
# Sets up what the benchmark harness needs beyond scripts/setup.sh, unattended and idempotent
# (a second run takes a second):
#   1. the Python environment .venv-bench from bench/requirements.txt: the Python baselines'
#      packages (FastAPI, uvicorn with uvloop/httptools, onnxruntime, tokenizers, orjson) and
#      matplotlib, kept apart from the tooling environment .venv
#   2. the workloads in bench/workloads/ (ignored by git), written by bench/make_workloads.py
#      from QQP (../shared/data/qqp) and Debian's python3.11-doc HTML (fetched with
#      `apt-get download` and unpacked there if the package is not installed)
#   3. ghz, the gRPC load generator bench/grpc_bench.py drives, into ~/go/bin from the Go module
#      proxy, when Go is installed (skipped with a note otherwise)
# Usage: bench/setup.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
log() { echo "bench-setup: $*"; }

PY="${PYTHON:-python3}"
req_hash="$(sha256sum bench/requirements.txt | cut -c1-16)"
if [[ ! -f .venv-bench/.requirements-$req_hash ]]; then
  log "creating Python environment .venv-bench"
  start=$SECONDS
  [[ -x .venv-bench/bin/python ]] || "$PY" -m venv .venv-bench
  .venv-bench/bin/pip install -q --disable-pip-version-check -r bench/requirements.txt
  rm -f .venv-bench/.requirements-*
  touch ".venv-bench/.requirements-$req_hash"
  log ".venv-bench ready in $((SECONDS - start)) s ($(du -sh .venv-bench | cut -f1))"
else
  log "Python environment .venv-bench up to date"
fi

wl_hash="$(cat bench/make_workloads.py models/all-MiniLM-L6-v2/tokenizer.json | sha256sum | cut -c1-16)"
if [[ ! -f bench/workloads/.made-$wl_hash ]]; then
  log "writing workloads to bench/workloads"
  .venv-bench/bin/python bench/make_workloads.py --out bench/workloads
  rm -f bench/workloads/.made-*
  touch "bench/workloads/.made-$wl_hash"
else
  log "workloads up to date"
fi

GHZ_VERSION=v0.120.0
if [[ -x $HOME/go/bin/ghz ]]; then
  log "ghz present"
elif command -v go >/dev/null 2>&1; then
  log "installing ghz $GHZ_VERSION (gRPC load generator) into ~/go/bin"
  go install "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
else
  log "note: no Go toolchain, so no ghz: bench/grpc_bench.py will not run"
fi
