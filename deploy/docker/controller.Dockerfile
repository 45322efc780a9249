# The fleetgate controller: FleetPolicy reconcile, the sidecar-injection webhook and the admin
# listener in one binary. FROM scratch: no shell, no package manager. Build with the
# repository's image script, which stages this file's context and runs
# `buildah bud -f deploy/docker/controller.Dockerfile <context>`:
#   deploy/images/build.sh --only fleetgate-controller [--profile release]
#
# The staged rootfs/ holds the controller binary (debug info stripped), exactly the shared
# libraries it loads (glibc, libgcc_s), the CA roots at /etc/ssl/certs/ca-certificates.crt and
# /etc/passwd and /etc/group naming `nonroot` (uid/gid 65532, as the chart expects), taken from
# a Debian bookworm minbase rootfs the script debootstraps.
FROM scratch
COPY rootfs/ /
USER 65532:65532
EXPOSE 8080 9443
ENTRYPOINT ["/usr/local/bin/fleetgate-controller"]
CMD ["run"]
