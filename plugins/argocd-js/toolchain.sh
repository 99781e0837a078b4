#!/usr/bin/env bash
# The JavaScript plugins' pinned toolchain (componentize-qjs and js-yaml, package-lock.json):
# installs it with `npm ci` when node_modules is missing or older than the lock file, then prints
# the path of componentize-qjs. Used by this plugin's build.sh and by plugins/fleet-js/build.sh,
# whose modules import this plugin's (and so js-yaml from this node_modules).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
stamp=node_modules/.package-lock.json
if [ ! -x node_modules/.bin/componentize-qjs ] || [ ! -f "$stamp" ] || [ package-lock.json -nt "$stamp" ]; then
    npm ci --no-audit --no-fund >&2
fi
echo "$here/node_modules/.bin/componentize-qjs"
