#!/usr/bin/env bash
# Fuzz smoke pass (`make fuzz-smoke`, and CI via .ci/run): every libFuzzer target built by
# `make fuzz` first replays its committed regressions (fuzz/regressions/<target>/: inputs
# that once crashed it), then fuzzes for a short time-box starting from its seed corpus
# (fuzz/corpus/<target>/). Any crash, leak, sanitizer report, timeout or out-of-memory fails
# the pass; the input that caused it is kept and its path printed.
#
# New inputs found go to a scratch folder, never into the committed corpus; to grow the
# corpus, run a target by hand (docs/fuzzing.md).
#
# Usage: scripts/fuzz_smoke.sh [seconds per target (default 20)] [target...]
# Environment: FUZZ_BUILD (default build-fuzz), FUZZ_ARTIFACTS (default a temporary folder).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SECONDS_PER_TARGET="${1:-20}"
[[ $# -gt 0 ]] && shift
BUILD="${FUZZ_BUILD:-$ROOT/build-fuzz}"
TARGETS=("$@")
if [[ ${#TARGETS[@]} -eq 0 ]]; then
  TARGETS=(fuzz_http_request fuzz_openai_json fuzz_tei_json fuzz_kserve_json fuzz_tokenizer
           fuzz_cached_value fuzz_config_yaml fuzz_kserve_grpc fuzz_image_decode)
fi
SCRATCH="$(mktemp -d -t tailcut-fuzz.XXXXXX)"
ARTIFACTS="${FUZZ_ARTIFACTS:-$SCRATCH/artifacts}"
mkdir -p "$ARTIFACTS"
trap 'rm -rf "$SCRATCH/corpus"' EXIT

# A crash is reported, not hidden: abort on the first error of any sanitizer.
export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=1:detect_leaks=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:abort_on_error=1:print_stacktrace=1}"

dict_for() {
  case "$1" in
    fuzz_http_request) echo "$ROOT/fuzz/dict/http.dict" ;;
    fuzz_openai_json | fuzz_tei_json | fuzz_kserve_json) echo "$ROOT/fuzz/dict/json.dict" ;;
    fuzz_config_yaml) echo "$ROOT/fuzz/dict/config.dict" ;;
  esac
}

log() { echo "fuzz-smoke: $*"; }
failed=()
for target in "${TARGETS[@]}"; do
  bin="$BUILD/fuzz/$target"
  [[ -x $bin ]] || { log "$bin is missing: run 'make fuzz' first"; exit 1; }
  out="$SCRATCH/$target.log"
  regressions=("$ROOT/fuzz/regressions/$target"/*)
  if [[ -e ${regressions[0]} ]]; then
    # Individual files: each runs once, and the first that still crashes names itself.
    if ! "$bin" "${regressions[@]}" >"$out" 2>&1; then
      tail -n 60 "$out"
      log "$target: a committed regression crashes again (see above)"
      failed+=("$target")
      continue
    fi
  fi
  dict=()
  [[ -n "$(dict_for "$target")" ]] && dict=("-dict=$(dict_for "$target")")
  mkdir -p "$SCRATCH/corpus/$target"
  # -timeout: one input may take 10 s (sanitized, on a busy machine) before it counts as a
  # hang; -rss_limit_mb: the server's own 4 MiB bodies never need more than this.
  if ! "$bin" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 -rss_limit_mb=2048 \
      -print_final_stats=1 -artifact_prefix="$ARTIFACTS/$target-" "${dict[@]}" \
      "$SCRATCH/corpus/$target" "$ROOT/fuzz/corpus/$target" >"$out" 2>&1; then
    tail -n 80 "$out"
    log "$target: FAILED; the input is in $ARTIFACTS (reproduce: $bin <file>)"
    failed+=("$target")
    continue
  fi
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$out")
  last=$(grep -E '^#[0-9]+.*(DONE|pulse|NEW|REDUCE|INITED)' "$out" | tail -n 1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  corpus=$(sed -n 's/.* corp: \([0-9]*\).*/\1/p' <<<"$last")
  log "$target: ok, ${runs:-?} runs in ${SECONDS_PER_TARGET} s, cov ${cov:-?} ft ${ft:-?}," \
      "corpus ${corpus:-?}"
done

if [[ ${#failed[@]} -gt 0 ]]; then
  log "failed: ${failed[*]}"
  exit 1
fi
log "all ${#TARGETS[@]} targets passed"
