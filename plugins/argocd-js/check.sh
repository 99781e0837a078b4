#!/usr/bin/env bash
# Builds the Argo CD plugin and checks it against its golden cases, directly under Node and
# through the host binary (`ksm-adapter plugin translate`, `plugin status`, `plugin inspect`).
# Exits non-zero on any difference. For CI:
#
#   plugins/argocd-js/check.sh
#
# KSM_ADAPTER=<path> uses that host binary instead of building it with `cargo build -p ksm-adapter`;
# KSM_UPDATE_GOLDEN=1 rewrites every translate case's expected.yaml (review the diff).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
wasm="$here/dist/argocd.wasm"

"$here/build.sh" "$wasm"

if [ -z "${KSM_ADAPTER:-}" ]; then
    (cd "$repo" && cargo build --quiet -p ksm-adapter)
    KSM_ADAPTER="${CARGO_TARGET_DIR:-$repo/target}/debug/ksm-adapter"
fi

cd "$here"
node --import ./test/register.mjs test/check.mjs --wasm "$wasm" --cli "$KSM_ADAPTER"
