#!/usr/bin/env bash
# Builds the Argo CD plugin into a WebAssembly component.
#
#   plugins/argocd-js/build.sh [OUTPUT]      (default: plugins/argocd-js/dist/argocd.wasm)
#
# Installs the pinned toolchain from package-lock.json with `npm ci` when node_modules is
# missing or older than the lock file, then runs componentize-qjs: `--sync` (no component-model
# async ABI, which the host does not use), `--stub-wasi` (every WASI import replaced by a trap,
# so the component imports only ksm:adapter/host), `--opt-size` (the size-optimised QuickJS).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
output="${1:-$here/dist/argocd.wasm}"
case "$output" in /*) ;; *) output="$PWD/$output" ;; esac

cd "$here"
stamp=node_modules/.package-lock.json
if [ ! -x node_modules/.bin/componentize-qjs ] || [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
    npm ci --no-audit --no-fund
fi

mkdir -p "$(dirname "$output")"
node_modules/.bin/componentize-qjs \
    --wit ../../wit/since_v0.2.0/adapter.wit \
    --world adapter-plugin \
    --js src/plugin.js \
    --module-root . \
    --sync --stub-wasi --opt-size \
    --output "$output"
