#!/usr/bin/env bash
# Builds the control plane fleetgate's real-cluster suite runs against -- kube-apiserver,
# kube-controller-manager, kube-scheduler (this folder's go.mod) and etcd (etcd/go.mod) --
# from the Go module proxy, into a machine-level cache that outlives any one clone:
#
#   ${FLEETGATE_K8S_CACHE:-~/.cache/fleetgate/k8s}/v1.37.2-<key>/bin/
#
# <key> is the first 16 hex digits of the sha256 of the two go.sum files, so a changed
# pin builds into a new folder and an unchanged one is never rebuilt. The build goes
# into a temporary folder renamed into place only when every binary is there; a lock
# keeps two builds of the same key from racing. Go's own caches ($HOME's GOCACHE and
# GOMODCACHE) are used as they are.
#
# A cold build took 24-39 min wall (module downloads included), 19 min of CPU, on a 2-core
# machine shared with other builds; with the binaries cached it returns at once.
#
# With --node it builds the node's programs instead, into their own folder keyed by
# node/go.sum and node/probe/main.go (about 30 s with Go's caches warm from the control
# plane's build):
#
#   ${FLEETGATE_K8S_CACHE:-~/.cache/fleetgate/k8s}/node-v1.37.2-<key>/bin/
#     kubelet             the kubelet of the same release, from the wrapper module node/
#     probe               node/probe: a static test program (pause, HTTP server, dialer)
#     probe.oci.tar       an OCI archive of the image localhost/fleetgate-node-probe:1 holding
#                         only /probe (entrypoint /probe, argument "pause": a sandbox image too)
#
# Usage: build.sh                  build if missing, then print the bin folder (last line of stdout)
#        build.sh --dir            print the bin folder without building (it may not exist)
#        build.sh --node [--dir]   the same for the node's folder
# On failure it prints go's error and exits non-zero.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
# The release's own date (the module proxy's time for k8s.io/kubernetes@v1.37.2), so
# two builds of the same pin are byte-for-byte the same.
BUILD_DATE=2026-10-27T12:01:04Z

node=false
if [ "${1:-}" = "--node" ]; then
  node=true
  shift
fi

cache="${FLEETGATE_K8S_CACHE:-$HOME/.cache/fleetgate/k8s}"
if $node; then
  key="$(cat "$here/node/go.sum" "$here/node/probe/main.go" | sha256sum | cut -c1-16)"
  name="node-$K8S_VERSION-$key"
  bins=(kubelet probe probe.oci.tar)
else
  key="$(cat "$here/go.sum" "$here/etcd/go.sum" | sha256sum | cut -c1-16)"
  name="$K8S_VERSION-$key"
  bins=(kube-apiserver kube-controller-manager kube-scheduler etcd)
fi
dest="$cache/$name"

complete() {
  local b
  for b in "${bins[@]}"; do [ -s "$dest/bin/$b" ] || return 1; done
}

if [ "${1:-}" = "--dir" ]; then
  echo "$dest/bin"
  exit 0
fi

if complete; then
  echo "$dest/bin"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock-$name"
flock 9
if complete; then # another build finished while this one waited for the lock
  echo "$dest/bin"
  exit 0
fi

tmp="$(mktemp -d "$cache/.build-$name.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
log="$cache/build-$name.log"
: >"$log"

stamp=()
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=(
    "-X '$pkg.gitVersion=$K8S_VERSION'"
    "-X '$pkg.gitMajor=1'"
    "-X '$pkg.gitMinor=37'"
    "-X '$pkg.gitTreeState=clean'"
    "-X '$pkg.buildDate=$BUILD_DATE'"
  )
done

run() { # runs one go build; on failure shows go's own output and stops
  local dir="$1"
  shift
  echo "+ (cd $dir && $*)" >>"$log"
  if ! (cd "$dir" && "$@") >>"$log" 2>&1; then
    echo "tests/k8s/build.sh: the build failed in $dir:" >&2
    cat "$log" >&2
    echo "tests/k8s/build.sh: full log: $log" >&2
    exit 1
  fi
}

# oci_archive BINARY NAME ARCHIVE: an OCI image layout (tar) of one uncompressed layer
# holding BINARY as /probe, named NAME for `ctr images import`; byte-for-byte reproducible.
oci_archive() {
  local bin="$1" ref="$2" out="$3" work layer config manifest
  work="$(mktemp -d "$tmp/.oci.XXXXXX")"
  mkdir -p "$work/root" "$work/layout/blobs/sha256"
  install -m 0755 "$bin" "$work/root/probe"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/root" -cf "$work/layer.tar" probe
  blob() { # stores file $1 as a blob; prints "sha256:<hex> <size>"
    local hex
    hex="$(sha256sum <"$1" | cut -c1-64)"
    cp "$1" "$work/layout/blobs/sha256/$hex"
    echo "sha256:$hex $(stat -c %s "$1")"
  }
  read -r layer_digest layer_size < <(blob "$work/layer.tar")
  printf '{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/probe"],"Cmd":["pause"]},"rootfs":{"type":"layers","diff_ids":["%s"]}}' \
    "$layer_digest" >"$work/config.json"
  read -r config_digest config_size < <(blob "$work/config.json")
  printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","digest":"%s","size":%s},"layers":[{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"%s","size":%s}]}' \
    "$config_digest" "$config_size" "$layer_digest" "$layer_size" >"$work/manifest.json"
  read -r manifest_digest manifest_size < <(blob "$work/manifest.json")
  printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"%s","size":%s,"annotations":{"io.containerd.image.name":"%s","org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest_digest" "$manifest_size" "$ref" "${ref##*:}" >"$work/layout/index.json"
  printf '{"imageLayoutVersion":"1.0.0"}' >"$work/layout/oci-layout"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$work/layout" -cf "$out" oci-layout index.json blobs
  rm -rf "$work"
}

start=$(date +%s)
export CGO_ENABLED=0
if $node; then
  echo "building the node (kubelet $K8S_VERSION) into $dest ..." >&2
  run "$here/node" go build -mod=readonly -buildvcs=false -trimpath -ldflags "-s -w ${stamp[*]}" \
    -o "$tmp/bin/" k8s.io/kubernetes/cmd/kubelet
  run "$here/node" go build -mod=readonly -buildvcs=false -trimpath -ldflags "-s -w" \
    -o "$tmp/bin/probe" ./probe
  oci_archive "$tmp/bin/probe" localhost/fleetgate-node-probe:1 "$tmp/bin/probe.oci.tar"
else
  echo "building the control plane $K8S_VERSION (etcd $ETCD_VERSION) into $dest ..." >&2
  run "$here" go build -mod=readonly -buildvcs=false -trimpath -ldflags "-s -w ${stamp[*]}" \
    -o "$tmp/bin/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler
  run "$here/etcd" go build -mod=readonly -buildvcs=false -trimpath -ldflags "-s -w" \
    -o "$tmp/bin/etcd" go.etcd.io/etcd/server/v3
fi

for b in "${bins[@]}"; do
  [ -s "$tmp/bin/$b" ] || { echo "tests/k8s/build.sh: $b was not built" >&2; exit 1; }
done
{
  if $node; then
    echo "kubelet $K8S_VERSION, $(go version)"
  else
    echo "kubernetes $K8S_VERSION, etcd $ETCD_VERSION, $(go version)"
  fi
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(($(date +%s) - start)) s"
} >"$tmp/BUILD"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "built in $(($(date +%s) - start)) s" >&2
echo "$dest/bin"
