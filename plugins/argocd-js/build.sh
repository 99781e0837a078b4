#!/usr/bin/env bash
# Builds the Argo CD plugin into a WebAssembly component.
#
#   plugins/argocd-js/build.sh [OUTPUT]      (default: plugins/argocd-js/dist/argocd.wasm)
#
# Installs the pinned toolchain (toolchain.sh: `npm ci` from package-lock.json when needed),
# then runs componentize-qjs: `--sync` (no component-model async ABI, which the host does not use), `--stub-wasi` (every WASI import replaced by a trap,
# so the component imports only ksm:adapter/host), `--opt-size` (the size-optimised QuickJS).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
output="${1:-$here/dist/argocd.wasm}"
case "$output" in /*) ;; *) output="$PWD/$output" ;; esac

componentize_qjs="$("$here/toolchain.sh")"

cd "$here"
mkdir -p "$(dirname "$output")"
"$componentize_qjs" \
    --wit ../../wit/since_v0.2.0/adapter.wit \
    --world adapter-plugin \
    --js src/plugin.js \
    --module-root . \
    --sync --stub-wasi --opt-size \
    --output "$output"
