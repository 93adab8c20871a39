#!/usr/bin/env bash
# Puts ONNX Runtime under third_party/onnxruntime/{include,lib} for systems without a
# distribution package (Debian 12). Safe to run twice: it does nothing when the files are there.
#
#   library: libonnxruntime.so.1 from the npm package onnxruntime-node (fetched with `npm pack`,
#            no install scripts run)
#   headers: the C/C++ API headers from Debian 13's libonnxruntime-dev .deb, downloaded with a
#            private apt sources list and state folder and unpacked with `dpkg -x` (never
#            installed). The C API is forward compatible: API-21 headers work with library 1.30.
set -euo pipefail

ORT_NPM_VERSION="${ORT_NPM_VERSION:-1.30.0}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DEST="${ONNXRUNTIME_ROOT:-$ROOT/third_party/onnxruntime}"
STAMP="$DEST/.fetched-$ORT_NPM_VERSION"

if [[ -f "$STAMP" && -f "$DEST/lib/libonnxruntime.so.1" && -f "$DEST/include/onnxruntime_cxx_api.h" ]]; then
  echo "onnxruntime: $DEST is up to date ($ORT_NPM_VERSION)"
  exit 0
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$DEST/lib" "$DEST/include"

echo "onnxruntime: fetching library from npm onnxruntime-node@$ORT_NPM_VERSION"
(cd "$work" && npm pack --silent "onnxruntime-node@$ORT_NPM_VERSION" >/dev/null)
tar -xzf "$work"/onnxruntime-node-*.tgz -C "$work" package/bin/napi-v6/linux/x64/libonnxruntime.so.1
install -m 0644 "$work/package/bin/napi-v6/linux/x64/libonnxruntime.so.1" "$DEST/lib/libonnxruntime.so.1"
ln -sf libonnxruntime.so.1 "$DEST/lib/libonnxruntime.so"

echo "onnxruntime: fetching headers from Debian trixie's libonnxruntime-dev"
apt_dir="$work/apt"
mkdir -p "$apt_dir/lists/partial" "$apt_dir/cache/archives/partial" "$apt_dir/etc"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
  >"$apt_dir/etc/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$apt_dir/etc/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$apt_dir/lists" -o "Dir::State::status=/dev/null"
  -o "Dir::Cache=$apt_dir/cache" -o "Debug::NoLocking=1" -o "APT::Sandbox::User=root")
apt-get "${apt_opts[@]}" -qq update
(cd "$work" && apt-get "${apt_opts[@]}" -qq download libonnxruntime-dev)
dpkg -x "$work"/libonnxruntime-dev_*.deb "$work/deb"
cp -r "$work/deb/usr/include/onnxruntime/." "$DEST/include/"

touch "$STAMP"
echo "onnxruntime: ready in $DEST"
