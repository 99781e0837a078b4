#!/usr/bin/env bash
# Builds the Sveltos plugin (Python) into a WebAssembly component.
#
#   plugins/sveltos-py/build.sh [OUTPUT]      (default: plugins/sveltos-py/dist/sveltos.wasm)
#
# Installs the pinned toolchain (PyPI componentize-py 0.25.1) into plugins/sveltos-py/.venv when
# it is missing, generates the bindings of world `adapter-plugin` from ../../wit/since_v0.2.0 and
# builds src/app.py against that world, intersected with wit/exports-only.wit (the same exports,
# no `ksm:adapter/host` import: the plugin never logs) and with `--stub-wasi` (every WASI import
# replaced by a trapping stub): the component imports nothing. Checks the output is a component
# (not a core module) that imports nothing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
output="${1:-$here/dist/sveltos.wasm}"
case "$output" in /*) ;; *) output="$PWD/$output" ;; esac
componentize_py_version=0.25.1
venv="$here/.venv"
tool="$venv/bin/componentize-py"

cd "$here"
if [ ! -x "$tool" ] || [ "$("$tool" --version 2>/dev/null)" != "componentize-py $componentize_py_version" ]; then
    if ! python3 -m venv --clear "$venv" 2>/dev/null; then
        # Debian's python3 lacks venv/ensurepip without python3-venv: install it as .ci/run
        # installs packages (through sudo when not root).
        sudo=""
        if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo=sudo; fi
        $sudo apt-get update -q
        $sudo apt-get install -y -q python3-venv
        python3 -m venv --clear "$venv"
    fi
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "componentize-py==$componentize_py_version"
fi

scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
bindings="$scratch/bindings"
"$tool" -d ../../wit/since_v0.2.0 -w adapter-plugin bindings "$bindings"
# A copy of the app: componentize-py imports it and leaves __pycache__ beside the sources, which
# the e2e build script watches (a stray rebuild of the test binaries on the next cargo run).
cp -r src "$scratch/src"

mkdir -p "$(dirname "$output")"
# -p: the app (src) and the generated bindings; no site-packages (the plugin needs only the
# standard library).
"$tool" -q -d ../../wit/since_v0.2.0 -d wit -w ksm:adapter/adapter-plugin@0.2.0 \
    componentize app -i ksm:sveltos-py/exports-only -p "$scratch/src" -p "$bindings" --stub-wasi -o "$output"

magic="$(head -c 8 "$output" | od -An -tx1 | tr -d ' \n')"
if [ "$magic" != "0061736d0d000100" ]; then
    echo "build.sh: $output is not a WebAssembly component (starts with $magic)" >&2
    exit 1
fi
echo "built $output ($(wc -c < "$output") bytes)"
