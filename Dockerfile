# syntax=docker/dockerfile:1
# The ksm-adapter image: the host binary (with the Flux plugin embedded) on distroless, non-root.
#
#   docker build -t ghcr.io/k0rdent/ksm-adapter:0.1.0 .
#
# The build stage needs network access to crates.io and to rustup's servers (wasm targets).

FROM rust:1.95-bookworm AS build
# The host's build script compiles the Flux plugin into a WASM component (wasm32-unknown-unknown);
# wasm32-wasip2 brings wasm-component-ld.
RUN rustup target add wasm32-unknown-unknown wasm32-wasip2
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p ksm-adapter \
    && install -D -m 0755 target/release/ksm-adapter /out/ksm-adapter

FROM gcr.io/distroless/cc-debian12:nonroot
LABEL org.opencontainers.image.title="ksm-adapter" \
      org.opencontainers.image.description="k0rdent service manager adapter host running CD-tool translation plugins as sandboxed WASM components" \
      org.opencontainers.image.source="https://github.com/k0rdent/ksm-adapter" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/ksm-adapter /usr/local/bin/ksm-adapter
# distroless's nonroot user; the chart runs it with a read-only root filesystem and mounts an
# emptyDir for the plugin cache (--plugin-cache-dir).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/ksm-adapter"]
CMD ["run"]
