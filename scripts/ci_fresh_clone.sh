#!/usr/bin/env bash
# CI check that the repository stands alone: what a user gets who clones tailcut into an empty
# folder, with nothing beside it (no ../shared) and no TAILCUT_* settings (TAILCUT_WERROR apart,
# see below), and types the README's two commands.
#
#   1. git clone of the committed repository (HEAD of this checkout) into a fresh mktemp -d
#   2. `make run ARGS="--host 127.0.0.1 --port 0"` in the background: the whole set-up, a build
#      of the server alone, then the server on a free loopback port (taken from its log); wait
#      (bounded) until /v2/health/ready answers 200
#   3. one real embeddings request with curl, its JSON checked (2 rows, 384 finite floats, unit
#      length, different texts give different vectors, usage counted), and one chat completion
#      from the generative model (an assistant message, a finish reason, usage counted)
#   4. SIGTERM to the server: it must exit 0 (make run then exits 0)
#   5. `make test` in the clone (builds everything else, every C++ unit test, and of the
#      Python suite the files that use the optional QQP data): must pass; the tests that need
#      the data skip, and their reasons are printed. The rest of the Python suite is not run
#      again here: .ci/run's `make test` ran all of it on a clean clone of its own, and
#      nothing but ../shared differs between the two (it cost 5 of CI's minutes).
#
# Prints how long each part took; the temporary folder is removed at exit (--keep keeps it).
# Measured on a busy 2-core machine (load ~7): 8 minutes with ccache filled by another clone's
# build (.ci/run's `make test` before it): set-up 1.7 (ONNX Runtime 16 s, .venv 54 s, model 31 s,
# server build 9 s), make test 6 (build ~1, ctest 40 s, pytest 4: now only the QQP suites,
# seconds); 23 minutes with a cold ccache (server build 10, the rest of the build 6).
#
# Usage: scripts/ci_fresh_clone.sh [--keep] [SOURCE [REF]]
#   SOURCE  the repository to clone (a path or URL; default: this checkout)
#   REF     the commit to test (default: SOURCE's HEAD). Uncommitted changes are never tested.
# Limits (seconds, environment): FRESH_CLONE_READY_TIMEOUT_S (default 900: set-up, build and
# start), FRESH_CLONE_TEST_TIMEOUT_S (default 2400: make test).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KEEP=0
ARGS=()
for a in "$@"; do
  case "$a" in
    --keep) KEEP=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "ci_fresh_clone: unknown option $a" >&2; exit 2 ;;
    *) ARGS+=("$a") ;;
  esac
done
SRC="${ARGS[0]:-$ROOT}"
REF="${ARGS[1]:-HEAD}"
READY_TIMEOUT_S="${FRESH_CLONE_READY_TIMEOUT_S:-900}"
TEST_TIMEOUT_S="${FRESH_CLONE_TEST_TIMEOUT_S:-2400}"

log() { echo "ci_fresh_clone: $*"; }
fail() { log "FAILED: $*"; exit 1; }

START=$SECONDS
TIMES=()
PHASE=""
t=$SECONDS
begin() { PHASE=$1; t=$SECONDS; }
mark() {  # mark: the phase begun last is done.
  TIMES+=("$(printf '%-44s %5d s' "$PHASE" $((SECONDS - t)))")
  log "$PHASE: $((SECONDS - t)) s"
  PHASE=""
}
report_times() {
  log "timings:"
  for line in "${TIMES[@]}"; do echo "  $line"; done
  [[ -z $PHASE ]] || printf '  %-44s %5d s (unfinished)\n' "$PHASE" $((SECONDS - t))
  printf '  %-44s %5d s\n' "total" $((SECONDS - START))
}

TMP="$(mktemp -d -t tailcut-fresh-XXXXXX)"
CLONE="$TMP/tailcut"
MAKE_PID=""
SERVER_PID=""

cleanup() {
  local rc=$?
  if [[ -n $MAKE_PID ]] && kill -0 "$MAKE_PID" 2>/dev/null; then
    [[ -n $SERVER_PID ]] && kill -TERM "$SERVER_PID" 2>/dev/null || true
    kill -TERM "$MAKE_PID" 2>/dev/null || true
    wait "$MAKE_PID" 2>/dev/null || true
  fi
  report_times
  if [[ $KEEP -eq 1 ]]; then
    log "kept $TMP"
  else
    rm -rf "$TMP"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

tail_log() {  # tail_log FILE LINES: the end of a log, indented, for a failure report.
  echo "----- last $2 lines of $1 -----"
  tail -n "$2" "$1" | sed 's/^/  | /'
  echo "-----"
}

# Every descendant of $1 (children first), from /proc: needs no procps.
descendants() {
  local parent=$1 f line rest pid ppid kids=()
  for f in /proc/[0-9]*/stat; do
    line="$(cat "$f" 2>/dev/null)" || continue
    rest="${line##*) }"          # After the command name, which may hold spaces.
    ppid="$(cut -d' ' -f2 <<<"$rest")"
    pid="${f#/proc/}"; pid="${pid%/stat}"
    [[ $ppid == "$parent" ]] && kids+=("$pid")
  done
  for pid in "${kids[@]}"; do
    echo "$pid"
    descendants "$pid"
  done
}

# 1. Clone -----------------------------------------------------------------------------------
begin "clone"
COMMIT="$(git -C "$SRC" rev-parse --verify --quiet "$REF^{commit}")" || fail "no commit $REF in $SRC"
if [[ $SRC == "$ROOT" ]] && [[ -n "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ]]; then
  log "note: $ROOT has uncommitted changes; they are not part of this check"
fi
log "cloning $SRC at $COMMIT into $CLONE (nothing beside it)"
git clone --quiet --no-checkout "$SRC" "$CLONE"
git -C "$CLONE" cat-file -e "$COMMIT^{commit}" 2>/dev/null || git -C "$CLONE" fetch --quiet origin "$COMMIT"
git -C "$CLONE" -c advice.detachedHead=false checkout --quiet --detach "$COMMIT"
[[ ! -e "$TMP/shared" ]] || fail "$TMP/shared exists"
mark

# The clone gets no settings from this run: no TAILCUT_* variables (TAILCUT_SHARED_DATA,
# TAILCUT_REQUIRE_SHARED_DATA, build and model folders, ...), no make variables or flags. One
# exception: TAILCUT_WERROR, when set (CI). It changes no object file of a build without
# warnings, which CI's own build has just shown this one to be, but it is on every compiler
# command line, so without it none of the clone's compiles would hit the ccache that build
# filled (a cold build of ~10 minutes instead of seconds).
werror="${TAILCUT_WERROR:-}"
unset TAILCUT_REQUIRE_SHARED_DATA TAILCUT_SHARED_DATA
while read -r var; do unset "$var"; done < <(compgen -e | grep '^TAILCUT_' || true)
[[ -z $werror ]] || export TAILCUT_WERROR="$werror"
unset BUILD FUZZ_BUILD ARGS PYTEST_ARGS MAKEFLAGS MFLAGS MAKELEVEL PYTHONPATH VIRTUAL_ENV

# 2. make run: set-up, server build, start --------------------------------------------------
begin "make run: set-up + server build + ready"
RUN_LOG="$TMP/make-run.log"
log "make run (set-up + server build + start; log $RUN_LOG, waiting up to $READY_TIMEOUT_S s)"
(cd "$CLONE" && exec make run ARGS="--host 127.0.0.1 --port 0") >"$RUN_LOG" 2>&1 </dev/null &
MAKE_PID=$!
PORT=""
deadline=$((SECONDS + READY_TIMEOUT_S))
while :; do
  if ! kill -0 "$MAKE_PID" 2>/dev/null; then
    rc=0; wait "$MAKE_PID" || rc=$?
    MAKE_PID=""
    tail_log "$RUN_LOG" 150
    fail "make run exited with code $rc before the server was ready"
  fi
  if [[ -z $PORT ]]; then
    PORT="$(grep -aoE 'listening on http://[^ ]+:[0-9]+' "$RUN_LOG" | tail -n1 | sed 's/.*://' || true)"
    [[ -n $PORT ]] && { log "server listening on 127.0.0.1:$PORT after $((SECONDS - t)) s"; t_listen=$SECONDS; }
  fi
  if [[ -n $PORT ]] &&
      [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$PORT/v2/health/ready" || true)" == 200 ]]; then
    break
  fi
  if [[ $SECONDS -ge $deadline ]]; then
    tail_log "$RUN_LOG" 150
    fail "server not ready within $READY_TIMEOUT_S s"
  fi
  sleep 1
done
grep -aE '^(setup|onnxruntime):' "$RUN_LOG" | sed 's/^/  /' || true
mark
# Where the time went, from when each set-up step's last file was written (for the report).
t_epoch=$(( $(date +%s) - (SECONDS - t) ))
prev=$t_epoch
for step in "ONNX Runtime:third_party/onnxruntime/.fetched-*" "Python .venv:.venv/.requirements-*" \
            "model export + variants:models/all-MiniLM-L6-v2/model.yaml" "server build:build/tailcut"; do
  name="${step%%:*}"
  file="$(compgen -G "$CLONE/${step#*:}" | head -n1 || true)"
  [[ -n $file ]] || continue
  at="$(stat -c %Y "$file")"
  [[ $at -ge $prev ]] || continue
  log "  set-up step done at +$((at - t_epoch)) s: $name ($((at - prev)) s)"
  prev=$at
done
log "  listening -> ready: $((SECONDS - t_listen)) s"
for f in "$CLONE"/build/tests "$CLONE"/build/bench; do
  if [[ -d $f ]] && find "$f" -maxdepth 2 -type f -perm -u+x | grep -q .; then
    fail "make run built more than the server: executables in ${f#"$CLONE"/}"
  fi
done

# 3. One real request ------------------------------------------------------------------------
begin "embeddings request"
BODY="$(curl -sS --fail-with-body --max-time 60 -H 'content-type: application/json' \
  -d '{"input": ["The repository stands alone.", "A user clones it anywhere and types two commands."], "model": "default"}' \
  "http://127.0.0.1:$PORT/v1/embeddings")" || { echo "$BODY"; fail "POST /v1/embeddings failed"; }
python3 - "$BODY" <<'EOF' || fail "unexpected /v1/embeddings answer: ${BODY:0:400}"
import json, math, sys
body = json.loads(sys.argv[1])
assert body["object"] == "list", body.get("object")
data = sorted(body["data"], key=lambda d: d["index"])
assert [d["index"] for d in data] == [0, 1], "two rows, indexed 0 and 1"
vectors = [d["embedding"] for d in data]
for v in vectors:
    assert len(v) == 384, f"{len(v)} dimensions, expected 384"
    assert all(isinstance(x, float) and math.isfinite(x) for x in v), "non-finite values"
    norm = math.sqrt(sum(x * x for x in v))
    assert abs(norm - 1) < 1e-3, f"norm {norm}"
cosine = sum(a * b for a, b in zip(*vectors))
assert cosine < 0.99, f"different texts, near-identical vectors (cosine {cosine})"
assert body["usage"]["prompt_tokens"] > 0, body["usage"]
print(f"  POST /v1/embeddings: 2 x 384 floats, unit length, cosine {cosine:.3f}, "
      f"{body['usage']['prompt_tokens']} tokens, model {body['model']!r}")
EOF
mark

begin "chat completion request"
BODY="$(curl -sS --fail-with-body --max-time 120 -H 'content-type: application/json' \
  -d '{"model": "smollm2-135m-instruct", "messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 16, "temperature": 0}' \
  "http://127.0.0.1:$PORT/v1/chat/completions")" || { echo "$BODY"; fail "POST /v1/chat/completions failed"; }
python3 - "$BODY" <<'EOF' || fail "unexpected /v1/chat/completions answer: ${BODY:0:400}"
import json, sys
body = json.loads(sys.argv[1])
assert body["object"] == "chat.completion", body.get("object")
choice = body["choices"][0]
assert choice["message"]["role"] == "assistant" and choice["message"]["content"].strip(), choice
assert choice["finish_reason"] in ("stop", "length"), choice["finish_reason"]
usage = body["usage"]
assert usage["prompt_tokens"] > 0 and 0 < usage["completion_tokens"] <= 16, usage
print(f"  POST /v1/chat/completions: {choice['message']['content']!r} "
      f"({usage['completion_tokens']} tokens, finish {choice['finish_reason']})")
EOF
mark

# 4. SIGTERM: the server exits 0 --------------------------------------------------------------
begin "SIGTERM -> exit 0"
for pid in $(descendants "$MAKE_PID"); do
  if [[ "$(cat "/proc/$pid/comm" 2>/dev/null)" == tailcut ]]; then SERVER_PID=$pid; break; fi
done
[[ -n $SERVER_PID ]] || fail "no tailcut process under make run (pid $MAKE_PID)"
log "SIGTERM to the server (pid $SERVER_PID)"
kill -TERM "$SERVER_PID"
deadline=$((SECONDS + 60))
while kill -0 "$MAKE_PID" 2>/dev/null && [[ $SECONDS -lt $deadline ]]; do sleep 0.2; done
if kill -0 "$MAKE_PID" 2>/dev/null; then
  tail_log "$RUN_LOG" 40
  fail "the server did not exit within 60 s of SIGTERM"
fi
rc=0; wait "$MAKE_PID" || rc=$?
MAKE_PID=""
if [[ $rc -ne 0 ]]; then
  tail_log "$RUN_LOG" 40
  fail "after SIGTERM, make run exited with code $rc (the server's code is in make's last line)"
fi
grep -aiE 'shut|stop|exit|SIGTERM' "$RUN_LOG" | tail -n 3 | sed 's/^/  /' || true
mark

# 5. make test ------------------------------------------------------------------------------
begin "make test (rest of the build, unit tests, the QQP suites)"
TEST_LOG="$TMP/make-test.log"
# The Python files that reach for the shared data (conftest's require_shared_data).
mapfile -t data_suites < <(cd "$CLONE" && grep -l 'require_shared_data(' tests/python/test_*.py)
[[ ${#data_suites[@]} -gt 0 ]] || fail "no Python suite calls require_shared_data"
log "make test (builds the rest, every unit test, then ${data_suites[*]}; log $TEST_LOG," \
    "up to $TEST_TIMEOUT_S s)"
rc=0
(cd "$CLONE" && exec timeout -k 30 "$TEST_TIMEOUT_S" make test PYTEST_PATHS="${data_suites[*]}") \
  >"$TEST_LOG" 2>&1 </dev/null || rc=$?
if [[ $rc -ne 0 ]]; then
  tail_log "$TEST_LOG" 200
  fail "make test in the fresh clone exited with code $rc"
fi
grep -aE '^(setup:|[0-9]+% tests passed|Total Test time)' "$TEST_LOG" | sed 's/^/  /' || true
skips="$(grep -aE '^SKIPPED' "$TEST_LOG" || true)"
[[ -n $skips ]] || fail "nothing skipped in the clone: the QQP tests found data that is not there"
log "skipped in the clone (expected: the tests that need the optional QQP data):"
sed 's/^/  /' <<<"$skips"
tail -n 1 "$TEST_LOG" | sed 's/^/  pytest: /'
mark
log "passed: a fresh clone of $COMMIT sets up, serves, stops cleanly and passes make test"
