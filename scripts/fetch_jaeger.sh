#!/usr/bin/env bash
# Builds Jaeger (v1.76.0: the Jaeger v2 binary, an OpenTelemetry collector with OTLP receivers
# on 4317/4318 and the query API on 16686), the trace collector tests/python/test_tracing.py
# exports to, from the Go module proxy, once per machine into the user's cache; prints its
# path. `go install ...@v1.76.0` refuses the module (its go.mod has replace directives), so
# the module is downloaded and built in a copy of its own tree, where they apply.
# Usage: scripts/fetch_jaeger.sh        (needs Go; about 5 minutes the first time)
set -euo pipefail
VERSION=v1.76.0
DEST="${TAILCUT_CACHE_DIR:-$HOME/.cache/tailcut}/jaeger-$VERSION"
if [[ -x $DEST/jaeger ]]; then
  echo "$DEST/jaeger"
  exit 0
fi
command -v go >/dev/null || { echo "fetch_jaeger: Go is not installed" >&2; exit 1; }
dir="$(go mod download -json "github.com/jaegertracing/jaeger@$VERSION" |
       python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')"
work="$(mktemp -d -t tailcut-jaeger.XXXXXX)"
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT
cp -r "$dir" "$work/src"
chmod -R u+w "$work/src"
mkdir -p "$DEST"
(cd "$work/src" && go build -o "$DEST/jaeger.part" ./cmd/jaeger) >&2
mv "$DEST/jaeger.part" "$DEST/jaeger"
echo "$DEST/jaeger"
