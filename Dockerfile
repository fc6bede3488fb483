# syntax=docker/dockerfile:1
# The operator image: build with the Rust toolchain, run on distroless as non-root.
#   docker build -t ghcr.io/example/microservice-operator:0.1.0 .
# The binary links only glibc and libgcc (TLS is rustls on ring, no OpenSSL; jemalloc is linked in statically), so
# distroless `cc` is enough.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS builder
WORKDIR /src
# The whole workspace is needed: the binary embeds deploy/ (the `manifests` command) at build time, and Cargo reads
# every member's manifest. Only the microservice-operator package is built (it depends on crates/core, not on
# kubesim or the kubectl plugin).
COPY . .
# Cache mounts keep the registry and compiled dependencies between builds, so a source change rebuilds only the
# workspace crates. target/ is a cache mount, so the binary is copied out of it in the same step.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p microservice-operator --bin microservice-operator \
    && install -D -m 0755 target/release/microservice-operator /out/microservice-operator

# bookworm's glibc, like the builder; `nonroot` is uid/gid 65532 with no shell and no package manager.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=builder /out/microservice-operator /usr/local/bin/microservice-operator
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/microservice-operator"]
# The Deployment's `args` replace this (`run --namespace todo`).
CMD ["run"]
