# syntax=docker/dockerfile:1
# The fleetgate gate: the sidecar (`serve`) and the transparent-capture init container
# (`init-iptables`) run from this one image. Build from the repository root:
#   docker build -f deploy/docker/proxy.Dockerfile -t ghcr.io/fleetgate/fleetgate-proxy:0.1.0 .
#
# The runtime stage is Debian slim rather than distroless because `init-iptables` needs the
# iptables binaries (nft backend preferred, legacy fallback). The sidecar itself runs as uid 15000,
# which the capture rules exempt; only the init container runs as root (set by the injector).

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p fleetgate-proxy \
    && install -D -m 0755 target/release/fleetgate-proxy /out/fleetgate-proxy

FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends iptables \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 15000 fleetgate \
    && useradd --system --uid 15000 --gid 15000 --no-create-home --shell /usr/sbin/nologin fleetgate
COPY --from=build /out/fleetgate-proxy /usr/local/bin/fleetgate-proxy
USER 15000:15000
EXPOSE 15180 15181 15182 15190
ENTRYPOINT ["/usr/local/bin/fleetgate-proxy"]
CMD ["serve", "--policy", "/etc/fleetgate/policy.yaml"]
