#!/usr/bin/env bash
# Builds the Sveltos plugin and checks it against its golden cases, natively (its modules under
# CPython) and through the host binary (`ksm-adapter plugin inspect`, `plugin translate`,
# `plugin status`, `plugin test`). Exits non-zero on any difference. For CI:
#
#   plugins/sveltos-py/check.sh
#
# KSM_ADAPTER=<path> uses that host binary instead of building it with `cargo build -p ksm-adapter`;
# KSM_UPDATE_GOLDEN=1 rewrites the expected.yaml / expected-status.yaml files (review the diff).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
wasm="$here/dist/sveltos.wasm"

"$here/build.sh" "$wasm"

if [ -z "${KSM_ADAPTER:-}" ]; then
    (cd "$repo" && cargo build --quiet -p ksm-adapter)
    KSM_ADAPTER="${CARGO_TARGET_DIR:-$repo/target}/debug/ksm-adapter"
fi

# PyYAML (installed by .ci/run) for the YAML files; the plugin itself needs only the stdlib.
python=python3
if ! "$python" -c 'import yaml' 2>/dev/null; then
    "$here/.venv/bin/python" -m pip install -q --disable-pip-version-check 'PyYAML==6.0.3'
    python="$here/.venv/bin/python"
fi
# -B: no __pycache__ beside the sources (the e2e build script watches them).
exec "$python" -B "$here/test/check.py" --wasm "$wasm" --cli "$KSM_ADAPTER"
