#!/usr/bin/env bash
# The OpenTelemetry exporter's cost (BENCHMARKS.md, "Tracing overhead"): 3 rounds of 30 s at
# 100 req/s (short workload, cache off) against `tailcut serve` without tracing, then with every
# trace exported to a local Jaeger (scripts/fetch_jaeger.sh); prints ok/sent, P50 and P99 (ms),
# and the exporter's counters.
# Usage: bench/tracing_overhead.sh   (after make build and bench/setup.sh)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
J="$(scripts/fetch_jaeger.sh)"
$J > /tmp/jaeger-bench.log 2>&1 & JP=$!
for i in $(seq 1 120); do curl -sf localhost:16686/api/services >/dev/null && break; sleep 0.5; done
run() {  # run <label> <round> <extra tailcut serve flags...>
  local label=$1 rep=$2; shift 2
  local port=$((20000 + RANDOM % 20000))
  build/tailcut serve --host 127.0.0.1 --port $port --grpc-port 0 --model-repository models \
    --cache.enabled=false --precision.mode off "$@" > /tmp/tb-$label.log 2>&1 & local sp=$!
  for i in $(seq 1 120); do curl -sf localhost:$port/v2/health/ready >/dev/null && break; sleep 0.5; done
  build/tailcut-loadgen --port $port --path /v1/embeddings --workload bench/workloads/short.jsonl \
    --rate 100 --duration 30 --warmup 3 --out /tmp/tb-$label-$rep.json >/dev/null 2>&1 || true
  python3 -c "import json;r=json.load(open('/tmp/tb-$label-$rep.json'));l=r['latency_ms'];print('$label', r['ok'], r['sent'], round(l['p50'],2), round(l['p99'],2))"
  curl -s localhost:$port/metrics | grep '^tailcut_trace' || true
  kill -TERM $sp; wait $sp || true
}
for rep in 1 2 3; do
  run off $rep
  run traced $rep --tracing.otlp_endpoint http://127.0.0.1:4318/v1/traces --tracing.sample_ppm 1000000
done
kill $JP
