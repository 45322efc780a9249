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
# Usage: build.sh            build if missing, then print the bin folder (last line of stdout)
#        build.sh --dir      print the bin folder without building (it may not exist)
# On failure it prints go's error and exits non-zero.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.3
# The release's own date (the module proxy's time for k8s.io/kubernetes@v1.37.2), so
# two builds of the same pin are byte-for-byte the same.
BUILD_DATE=2026-10-27T12:01:04Z

key="$(cat "$here/go.sum" "$here/etcd/go.sum" | sha256sum | cut -c1-16)"
cache="${FLEETGATE_K8S_CACHE:-$HOME/.cache/fleetgate/k8s}"
dest="$cache/$K8S_VERSION-$key"
bins=(kube-apiserver kube-controller-manager kube-scheduler etcd)

complete() {
  local b
  for b in "${bins[@]}"; do [ -x "$dest/bin/$b" ] || return 1; done
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
exec 9>"$cache/.lock-$K8S_VERSION-$key"
flock 9
if complete; then # another build finished while this one waited for the lock
  echo "$dest/bin"
  exit 0
fi

tmp="$(mktemp -d "$cache/.build-$K8S_VERSION-$key.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
log="$cache/build-$K8S_VERSION-$key.log"
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
    echo "tests/k8s/build.sh: the control-plane build failed in $dir:" >&2
    cat "$log" >&2
    echo "tests/k8s/build.sh: full log: $log" >&2
    exit 1
  fi
}

start=$(date +%s)
echo "building the control plane $K8S_VERSION (etcd $ETCD_VERSION) into $dest ..." >&2
export CGO_ENABLED=0
run "$here" go build -mod=readonly -buildvcs=false -trimpath -ldflags "-s -w ${stamp[*]}" \
  -o "$tmp/bin/" \
  k8s.io/kubernetes/cmd/kube-apiserver \
  k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler
run "$here/etcd" go build -mod=readonly -buildvcs=false -trimpath -ldflags "-s -w" \
  -o "$tmp/bin/etcd" go.etcd.io/etcd/server/v3

for b in "${bins[@]}"; do
  [ -x "$tmp/bin/$b" ] || { echo "tests/k8s/build.sh: $b was not built" >&2; exit 1; }
done
{
  echo "kubernetes $K8S_VERSION, etcd $ETCD_VERSION, $(go version)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(($(date +%s) - start)) s"
} >"$tmp/BUILD"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "built in $(($(date +%s) - start)) s" >&2
echo "$dest/bin"
