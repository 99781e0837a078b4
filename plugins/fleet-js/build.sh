#!/usr/bin/env bash
# Builds the Fleet plugin into a WebAssembly component.
#
#   plugins/fleet-js/build.sh [OUTPUT]      (default: plugins/fleet-js/dist/fleet.wasm)
#
# Its modules import the Argo CD plugin's generic ones (names, values, the ServiceSet and template
# readers), so it builds with that plugin's pinned toolchain (plugins/argocd-js/toolchain.sh) and
# with `--module-root ..` (plugins/), which lets componentize-qjs resolve ../../argocd-js/src and
# js-yaml from plugins/argocd-js/node_modules. The options are the Argo CD plugin's: `--sync`,
# `--stub-wasi` (the component imports only ksm:adapter/host), `--opt-size`.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
output="${1:-$here/dist/fleet.wasm}"
case "$output" in /*) ;; *) output="$PWD/$output" ;; esac

componentize_qjs="$("$here/../argocd-js/toolchain.sh")"

cd "$here"
mkdir -p "$(dirname "$output")"
"$componentize_qjs" \
    --wit ../../wit/since_v0.2.0/adapter.wit \
    --world adapter-plugin \
    --js src/plugin.js \
    --module-root .. \
    --sync --stub-wasi --opt-size \
    --output "$output"
