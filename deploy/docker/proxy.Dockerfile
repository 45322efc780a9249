# The fleetgate gate: the sidecar (`serve`) and the transparent-capture init container
# (`init-iptables`) run from this one image. FROM scratch: no shell, no package manager. Build
# with the repository's image script, which stages this file's context and runs
# `buildah bud -f deploy/docker/proxy.Dockerfile <context>`:
#   deploy/images/build.sh --only fleetgate-proxy [--profile release]
#
# The staged rootfs/ holds the gate binary (debug info stripped), exactly the shared libraries it
# loads, iptables for `init-iptables` (xtables-nft-multi and xtables-legacy-multi with their
# xtables modules and libraries; `iptables`, `iptables-save`, `iptables-restore` and the ip6tables
# names are the nft backend, `-nft`/`-legacy` name each one explicitly), the CA roots at
# /etc/ssl/certs/ca-certificates.crt, and /etc/passwd and /etc/group naming fleetgate (uid/gid
# 15000), all taken from a Debian bookworm minbase rootfs the script debootstraps. The sidecar
# runs as uid 15000, which the capture rules exempt; only the init container runs as root (set
# by the injector). The root filesystem is read-only in the pod: the gate writes nothing there.
FROM scratch
COPY rootfs/ /
ENV PATH=/usr/local/bin:/usr/sbin:/usr/bin
USER 15000:15000
EXPOSE 15180 15181 15182 15190
ENTRYPOINT ["/usr/local/bin/fleetgate-proxy"]
CMD ["serve", "--policy", "/etc/fleetgate/policy.yaml"]
