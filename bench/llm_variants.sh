#!/usr/bin/env bash
# Precision variants of the generative model: makes each GGUF variant from the shipped Q4_1
# with llama.cpp's quantizer (`tailcut quantize-gguf`) in a scratch folder outside the repo,
# then measures for each: file size, perplexity over a fixed Debian text (`tailcut
# perplexity`, llama.cpp's scheme), and prefill and decode speed (bench/llama_engine_bench,
# one sequence). Speed runs are interleaved (round r runs every variant once, in turn) so that
# load from other work on the machine falls on all of them alike; the median of the rounds is
# reported, with the load average before each run. The variants and their perplexities stay in
# the scratch folder, and a later run reuses those newer than their inputs.
#
# Usage: bench/llm_variants.sh            (after building tailcut and llama_engine_bench)
#   TYPES="q4_1 q4_0 q5_1 q8_0 f16"  variants (q4_1 is the shipped file itself)
#   SCRATCH=/tmp/tailcut-llm-variants  where the variants and raw results go (not the repo)
#   TEXT=/usr/share/common-licenses/GPL-3  CONTEXT=512  PPL_THREADS=2
#   ROUNDS=3  BENCH_THREADS="1 2"  BUILD=build  TAILCUT_GGUF=<source GGUF>
# Prints a Markdown table and writes $SCRATCH/results.json.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
TYPES="${TYPES:-q4_1 q4_0 q5_1 q8_0 f16}"
SCRATCH="${SCRATCH:-/tmp/tailcut-llm-variants}"
TEXT="${TEXT:-/usr/share/common-licenses/GPL-3}"
CONTEXT="${CONTEXT:-512}"
PPL_THREADS="${PPL_THREADS:-2}"
ROUNDS="${ROUNDS:-3}"
BENCH_THREADS="${BENCH_THREADS:-1 2}"
BUILD="${BUILD:-build}"
log() { echo "llm-variants: $*" >&2; }

# The shipped model: $TAILCUT_GGUF, else wherever scripts/setup.sh put it (the per-model
# folder, or the older models/gguf/).
src="${TAILCUT_GGUF:-}"
if [[ -z "$src" ]]; then
  for f in models/smollm2-135m-instruct/*Q4_1*.gguf \
           models/gguf/SmolLM2-135M-Instruct.Q4_1.gguf; do
    [[ -f "$f" ]] && { src="$f"; break; }
  done
fi
[[ -n "$src" && -f "$src" ]] || { log "no source GGUF: set TAILCUT_GGUF"; exit 1; }
[[ -f "$TEXT" ]] || { log "text $TEXT not found"; exit 1; }
for bin in "$BUILD/tailcut" "$BUILD/bench/llama_engine_bench"; do
  [[ -x "$bin" ]] || { log "$bin not built"; exit 1; }
done
mkdir -p "$SCRATCH"
case "$(cd "$SCRATCH" && pwd)/" in
  "$ROOT"/*) log "SCRATCH must be outside the repository"; exit 1 ;;
esac
raw="$SCRATCH/raw.jsonl"
: >"$raw"

# 1. The variants (kept in $SCRATCH: a later run reuses those newer than the source).
declare -A file
for t in $TYPES; do
  if [[ "$t" == q4_1 ]]; then
    file[$t]="$src"
    continue
  fi
  file[$t]="$SCRATCH/SmolLM2-135M-Instruct.$t.gguf"
  if [[ ! -f "${file[$t]}" || "${file[$t]}" -ot "$src" ]]; then
    log "quantizing to $t"
    "$BUILD/tailcut" quantize-gguf --in "$src" --out "${file[$t]}" --type "$t" --threads 2 |
      tail -n 1 >"$SCRATCH/quantize-$t.json"
  fi
done

# 2. Quality: perplexity over the same text for every variant (also reused: it depends only on
# the file, the text and the window, and takes minutes per variant on busy cores).
for t in $TYPES; do
  ppl="$SCRATCH/perplexity-$t-$CONTEXT-$(basename "$TEXT").json"
  if [[ ! -s "$ppl" || "$ppl" -ot "${file[$t]}" ]]; then
    log "perplexity $t"
    "$BUILD/tailcut" perplexity --model "${file[$t]}" --text "$TEXT" --context "$CONTEXT" \
      --threads "$PPL_THREADS" | tail -n 1 >"$ppl"
  fi
  printf '{"kind":"perplexity","variant":"%s","result":%s}\n' "$t" "$(cat "$ppl")" >>"$raw"
done

# 3. Speed, interleaved rounds.
for r in $(seq 1 "$ROUNDS"); do
  for th in $BENCH_THREADS; do
    for t in $TYPES; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      log "round $r, $th thread(s), $t (load $load)"
      b=$("$BUILD/bench/llama_engine_bench" --model "${file[$t]}" --threads "$th" \
            --prompt-tokens 256 --decode-tokens 64 --sequences 1 --repeats 1 | tail -n 1)
      printf '{"kind":"speed","variant":"%s","round":%d,"threads":%d,"load1":%s,"result":%s}\n' \
        "$t" "$r" "$th" "$load" "$b" >>"$raw"
    done
  done
done

# 4. Summary.
python3 - "$raw" "$SCRATCH/results.json" "$TEXT" "$TYPES" <<'PY'
import json, os, statistics, sys
raw, out, text, types = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()
rows = [json.loads(l) for l in open(raw)]
ppl = {r["variant"]: r["result"] for r in rows if r["kind"] == "perplexity"}
speed = [r for r in rows if r["kind"] == "speed"]
threads = sorted({r["threads"] for r in speed})
loads = [r["load1"] for r in speed]
summary = {"text": text, "variants": {}, "load1_min": min(loads), "load1_max": max(loads)}
head = "| variant | file MiB | perplexity | mean NLL |"
sep = "|---|---:|---:|---:|"
for th in threads:
    head += f" prefill tok/s ({th}t) | decode tok/s ({th}t) |"
    sep += "---:|---:|"
print(head)
print(sep)
for t in types:
    p = ppl[t]
    v = {"file": p["model"], "bytes": os.path.getsize(p["model"]), "perplexity": p["perplexity"],
         "mean_nll": p["mean_nll"], "scored_tokens": p["scored_tokens"],
         "text_tokens": p["text_tokens"], "description": p["description"]}
    line = f"| {t} | {v['bytes'] / 2**20:.1f} | {p['perplexity']:.3f} | {p['mean_nll']:.4f} |"
    for th in threads:
        runs = [r["result"] for r in speed if r["variant"] == t and r["threads"] == th]
        pre = [x["prefill_tokens_per_s"] for x in runs]
        dec = [x["decode_1_tokens_per_s"] for x in runs]
        v[f"prefill_{th}t"] = {"median": statistics.median(pre), "runs": pre}
        v[f"decode_{th}t"] = {"median": statistics.median(dec), "runs": dec}
        line += (f" {statistics.median(pre):.0f} ({min(pre):.0f}–{max(pre):.0f}) |"
                 f" {statistics.median(dec):.0f} ({min(dec):.0f}–{max(dec):.0f}) |")
    summary["variants"][t] = v
    print(line)
first = ppl[types[0]]
print(f"\nperplexity: {text}, {first['text_tokens']} tokens, {first['windows']} windows of "
      f"{first['window_tokens']}, {first['scored_tokens']} scored; speed: median of "
      f"{len(speed) // max(1, len(types) * len(threads))} interleaved rounds (range in "
      f"brackets); 1-minute load average {min(loads)}–{max(loads)}")
json.dump(summary, open(out, "w"), indent=1)
PY
