#!/bin/sh
# Builds app.py into a WASM component with componentize-py (CPython): installs the pinned
# componentize-py into .venv (PyPI) when it is missing, generates the WIT bindings, and stubs
# WASI out (the component imports nothing but the contract's optional host log).
# Prints the component's path.
set -eu
cd "$(dirname "$0")"
version=__COMPONENTIZE_PY__
tool=.venv/bin/componentize-py
if [ ! -x "$tool" ] || [ "$("$tool" --version 2>/dev/null)" != "componentize-py $version" ]; then
    if ! python3 -m venv --clear .venv >&2; then
        echo "python3 -m venv failed: install Python 3.10 or later with venv (Debian: python3-venv)" >&2
        exit 1
    fi
    .venv/bin/python -m pip install -q --disable-pip-version-check "componentize-py==$version" >&2
fi
rm -rf .bindings
"$tool" -d wit -w adapter-plugin bindings .bindings >&2
"$tool" -d wit -w adapter-plugin componentize app -p . -p .bindings --stub-wasi -o __NAME__.wasm >&2
echo "__NAME__.wasm"
