#!/usr/bin/env bash
# Builds the Fleet plugin and checks it through the host binary: `ksm-adapter plugin inspect`
# (metadata, no imports but ksm:adapter/host) and `ksm-adapter plugin test` (the conformance
# suite and every golden case of testdata/, compared exactly). Exits non-zero on any difference.
# For CI:
#
#   plugins/fleet-js/check.sh
#
# KSM_ADAPTER=<path> uses that host binary instead of building it with `cargo build -p ksm-adapter`;
# KSM_UPDATE_GOLDEN=1 rewrites every translate case's expected.yaml (`plugin test --update`;
# review the diff).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
wasm="$here/dist/fleet.wasm"

"$here/build.sh" "$wasm"

if [ -z "${KSM_ADAPTER:-}" ]; then
    (cd "$repo" && cargo build --quiet -p ksm-adapter)
    KSM_ADAPTER="${CARGO_TARGET_DIR:-$repo/target}/debug/ksm-adapter"
fi

inspect="$("$KSM_ADAPTER" plugin inspect "$wasm")"
echo "$inspect"
version="$(sed -n 's/^ *"version": "\(.*\)",$/\1/p' "$here/package.json")"
for expected in "  name: fleet" "  version: $version" "  contractVersion: 0.2.0" "  - ksm:adapter/host@0.2.0"; do
    if ! grep -qxF -- "$expected" <<<"$inspect"; then
        echo "check.sh: plugin inspect does not say \"$expected\"" >&2
        exit 1
    fi
done
imports="$(awk '/^  imports:/ {listed = 1; next} listed && /^  - / {n++; next} {listed = 0} END {print n + 0}' <<<"$inspect")"
if [ "$imports" != 1 ]; then
    echo "check.sh: the component imports $imports interfaces; only ksm:adapter/host is expected" >&2
    exit 1
fi

update=()
if [ "${KSM_UPDATE_GOLDEN:-}" = 1 ]; then update=(--update); fi
# The Fleet workspaces the cases place objects in besides the ServiceSet's namespace, as an
# operator allows them in the AdapterPlugin (README.md, "Which Fleet Cluster"): fleet-local
# (self-management: Fleet's own `local` Cluster) and fleet-default (the `workspace` setting).
"$KSM_ADAPTER" plugin test "$wasm" --fixtures "$here/testdata" \
    --allowed-namespace fleet-local --allowed-namespace fleet-default "${update[@]}"
