# syntax=docker/dockerfile:1
# The fleetgate controller: FleetPolicy reconcile, the sidecar-injection webhook and the admin
# listener in one binary. Build from the repository root:
#   docker build -f deploy/docker/controller.Dockerfile -t ghcr.io/fleetgate/fleetgate-controller:0.1.0 .

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p fleetgate-controller \
    && install -D -m 0755 target/release/fleetgate-controller /out/fleetgate-controller

# glibc, libgcc and CA roots, no shell; `nonroot` is uid/gid 65532, as the chart expects.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/fleetgate-controller /usr/local/bin/fleetgate-controller
USER 65532:65532
EXPOSE 8080 9443
ENTRYPOINT ["/usr/local/bin/fleetgate-controller"]
CMD ["run"]
