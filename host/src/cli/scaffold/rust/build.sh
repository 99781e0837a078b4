#!/bin/sh
# Builds the plugin into a WASM component with zero imports: wasm32-unknown-unknown linked by
# the toolchain's wasm-component-ld. Prints the component's path.
set -eu
cd "$(dirname "$0")"
if command -v rustup >/dev/null 2>&1; then
    rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
fi
host=$(rustc -vV | sed -n 's/^host: //p')
linker=${KSM_WASM_COMPONENT_LD:-$(rustc --print sysroot)/lib/rustlib/$host/bin/wasm-component-ld}
CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=$linker cargo build --release --target wasm32-unknown-unknown >&2
echo "${CARGO_TARGET_DIR:-target}/wasm32-unknown-unknown/release/__CRATE__.wasm"
