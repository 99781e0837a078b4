#!/bin/sh
# Builds plugin.js into a WASM component with componentize-qjs (QuickJS): synchronous exports,
# WASI stubbed out (the component imports nothing but the contract's optional host log).
# Prints the component's path.
set -eu
cd "$(dirname "$0")"
if ! command -v npm >/dev/null 2>&1; then
    echo "npm not found: install Node.js (20 or later) with npm" >&2
    exit 1
fi
[ -x node_modules/.bin/componentize-qjs ] || npm install --no-audit --no-fund >&2
node_modules/.bin/componentize-qjs --wit wit --world adapter-plugin --js plugin.js \
    --sync --stub-wasi --opt-size -o __NAME__.wasm >&2
echo "__NAME__.wasm"
