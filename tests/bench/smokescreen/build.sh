#!/usr/bin/env bash
# Builds smokescreen, the egress proxy tests/bench/forward_proxy.sh weighs fleetgate's forward
# proxy against, from the Go module proxy (this folder's go.mod pins the release and go.sum
# its whole module graph) into a machine-level cache that outlives any one clone:
#
#   ${FLEETGATE_SMOKESCREEN_CACHE:-~/.cache/fleetgate/smokescreen}/v0.1.0-<key>/bin/smokescreen
#
# <key> is the first 16 hex digits of the sha256 of go.sum, so a changed pin builds into a new
# folder and an unchanged one is never rebuilt. The build goes into a temporary folder renamed
# into place only when the binary is there; a lock keeps two builds of the same key from
# racing. Go's own caches ($HOME's GOCACHE and GOMODCACHE) are used as they are. The release's
# main package is built with `go build` inside this wrapper module (so the pins of go.sum are
# the ones used), not with `go install ...@version`.
#
# Usage: build.sh            build if missing, then print the binary's path (last line of stdout)
#        build.sh --path     print the binary's path without building (it may not exist)
# On failure it prints go's error and exits non-zero.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VERSION=v0.1.0

key="$(sha256sum "$here/go.sum" | cut -c1-16)"
cache="${FLEETGATE_SMOKESCREEN_CACHE:-$HOME/.cache/fleetgate/smokescreen}"
dest="$cache/$VERSION-$key"
bin="$dest/bin/smokescreen"

if [ "${1:-}" = "--path" ]; then
  echo "$bin"
  exit 0
fi
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi

mkdir -p "$cache"
exec 9>"$cache/.lock-$VERSION-$key"
flock 9
if [ -x "$bin" ]; then # another build finished while this one waited for the lock
  echo "$bin"
  exit 0
fi

tmp="$(mktemp -d "$cache/.build-$VERSION-$key.XXXXXX")"
chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
log="$cache/build-$VERSION-$key.log"
start=$(date +%s)
echo "building smokescreen $VERSION into $dest ..." >&2
if ! (cd "$here" && CGO_ENABLED=0 go build -mod=readonly -buildvcs=false -trimpath -ldflags "-s -w" \
  -o "$tmp/bin/smokescreen" github.com/stripe/smokescreen) >"$log" 2>&1; then
  echo "tests/bench/smokescreen/build.sh: the smokescreen build failed:" >&2
  cat "$log" >&2
  echo "tests/bench/smokescreen/build.sh: full log: $log" >&2
  exit 1
fi
[ -x "$tmp/bin/smokescreen" ] || { echo "tests/bench/smokescreen/build.sh: smokescreen was not built" >&2; exit 1; }
{
  echo "smokescreen $VERSION, $(go version)"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) in $(($(date +%s) - start)) s"
} >"$tmp/BUILD"
rm -rf "$dest"
mv "$tmp" "$dest"
trap - EXIT
echo "built in $(($(date +%s) - start)) s" >&2
echo "$bin"
