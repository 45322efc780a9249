#!/usr/bin/env bash
# Builds fleetgate's container images from source, with no registry and no base image, and
# saves each one as an OCI archive:
#
#   localhost/fleetgate-proxy:dev         the gate (sidecar `serve` and `init-iptables`), FROM scratch
#   localhost/fleetgate-controller:dev    the controller, FROM scratch
#   localhost/hermes-agent:0.19.0         Debian bookworm minbase + the pinned Hermes Agent venv
#   localhost/fleetgate-pause:1           the pod sandbox (deploy/images/pause.c, static), FROM scratch
#
# Every file in the images comes from this repository or from Debian bookworm root filesystems
# this script makes itself with `debootstrap --variant=minbase` from deb.debian.org (Hermes from
# PyPI, installed with pip inside the agent's root filesystem). The FROM-scratch images take from
# the bookworm rootfs exactly the shared libraries their binaries load (resolved with that rootfs's
# own loader, `ld.so --list`), so the gate and controller binaries must be linked against glibc
# <= bookworm's 2.36 (a bookworm build machine).
#
# The images are built by buildah from the Containerfiles in deploy/ (deploy/docker/proxy.Dockerfile,
# deploy/docker/controller.Dockerfile, deploy/images/hermes-agent.Containerfile,
# deploy/images/pause.Containerfile) over a context this script stages, then tagged in podman's
# storage and saved with `podman save --format oci-archive` (the archive's index names the image,
# so `ctr -n k8s.io images import` and `podman load` restore the tag).
#
# Everything is cached machine-wide under ${FLEETGATE_IMAGE_CACHE:-~/.cache/fleetgate/images}:
#   rootfs/<name>-<key>/rootfs       the debootstrap root filesystems, keyed by package list (and
#                                    for the agent, tests/python/requirements.txt)
#   pieces/<name>-<key>/             one image's archive and timings, keyed by its inputs (binary,
#                                    Containerfile, rootfs key, this script)
#   <profile>-<key>/<name>.oci.tar   the set asked for (hard links to the pieces) and a BUILD file
#                                    with sizes and build times; this folder is printed
# A fresh clone on a warm machine rebuilds nothing whose inputs are unchanged; the slow pieces
# (the agent's debootstrap and pip install) depend on neither the binaries nor this repository's
# Rust sources. Builds go into temporary folders renamed into place when complete; a lock keeps
# two builds from racing.
#
# Needs root, debootstrap, buildah, podman, objcopy, gcc (static glibc: libc6-dev). podman and
# buildah read CONTAINERS_CONF (default: tests/k8s/containers.conf, runc + cgroupfs).
#
# Usage: build.sh [--profile debug|release] [--only NAME]...   build what is missing, print the folder
#        build.sh [--profile ...] [--only NAME]... --dir       print the folder without building
# NAME is fleetgate-proxy, fleetgate-controller, hermes-agent or fleetgate-pause. The binaries are
# $FLEETGATE_PROXY_BIN and $FLEETGATE_CONTROLLER_BIN when set, else built with
# `cargo build --locked [--release] -p fleetgate-proxy -p fleetgate-controller` (CARGO_TARGET_DIR
# honoured). Debug info is stripped when a binary is copied into its image.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
export CONTAINERS_CONF="${CONTAINERS_CONF:-$root/tests/k8s/containers.conf}"

SUITE=bookworm
MIRROR=http://deb.debian.org/debian
HERMES_VERSION=0.19.0
# Packages of the two root filesystems (debootstrap --variant=minbase --include=...).
SLIM_PACKAGES=iptables,ca-certificates
AGENT_PACKAGES=python3,python3-venv,curl,ca-certificates
# Bump when the way a root filesystem is made changes (its folder is keyed by this too).
ROOTFS_RECIPE=1

all_names=(fleetgate-proxy fleetgate-controller hermes-agent fleetgate-pause)
declare -A tag=(
  [fleetgate-proxy]=localhost/fleetgate-proxy:dev
  [fleetgate-controller]=localhost/fleetgate-controller:dev
  [hermes-agent]=localhost/hermes-agent:$HERMES_VERSION
  [fleetgate-pause]=localhost/fleetgate-pause:1
)
declare -A containerfile=(
  [fleetgate-proxy]=$root/deploy/docker/proxy.Dockerfile
  [fleetgate-controller]=$root/deploy/docker/controller.Dockerfile
  [hermes-agent]=$here/hermes-agent.Containerfile
  [fleetgate-pause]=$here/pause.Containerfile
)

profile=debug
only=()
dir_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) profile="${2:?--profile needs debug or release}"; shift 2 ;;
    --only) only+=("${2:?--only needs an image name}"); shift 2 ;;
    --dir) dir_only=1; shift ;;
    *) echo "usage: build.sh [--profile debug|release] [--only NAME]... [--dir]" >&2; exit 64 ;;
  esac
done
case "$profile" in debug | release) ;; *) echo "build.sh: --profile is debug or release" >&2; exit 64 ;; esac
names=("${only[@]:-${all_names[@]}}")
for n in "${names[@]}"; do
  [ -n "${tag[$n]:-}" ] || { echo "build.sh: unknown image $n (${all_names[*]})" >&2; exit 64; }
done

cache="${FLEETGATE_IMAGE_CACHE:-$HOME/.cache/fleetgate/images}"
mkdir -p "$cache/rootfs" "$cache/pieces"
sha() { sha256sum | cut -c1-16; }
say() { echo "build.sh: $*" >&2; }
now() { date +%s; }

wants() { # wants NAME: whether NAME is among the images asked for
  local n
  for n in "${names[@]}"; do [ "$n" = "$1" ] && return 0; done
  return 1
}

# --- the binaries --------------------------------------------------------------------------

proxy_bin="${FLEETGATE_PROXY_BIN:-}"
controller_bin="${FLEETGATE_CONTROLLER_BIN:-}"
if { wants fleetgate-proxy && [ -z "$proxy_bin" ]; } || { wants fleetgate-controller && [ -z "$controller_bin" ]; }; then
  target="${CARGO_TARGET_DIR:-$root/target}"
  case "$target" in /*) ;; *) target="$root/$target" ;; esac
  if [ "$dir_only" = 0 ]; then
    flags=(--locked -p fleetgate-proxy -p fleetgate-controller)
    [ "$profile" = release ] && flags+=(--release)
    say "cargo build ${flags[*]}"
    (cd "$root" && cargo build --quiet "${flags[@]}") >&2
  fi
  [ -n "$proxy_bin" ] || proxy_bin="$target/$profile/fleetgate-proxy"
  [ -n "$controller_bin" ] || controller_bin="$target/$profile/fleetgate-controller"
fi

# --- keys ----------------------------------------------------------------------------------

script_key="$(sha <"$here/build.sh")"
slim_key="$(printf '%s\n' "$SUITE" "$MIRROR" "$SLIM_PACKAGES" "$ROOTFS_RECIPE" | sha)"
agent_rootfs_key="$(printf '%s\n' "$SUITE" "$MIRROR" "$AGENT_PACKAGES" "$ROOTFS_RECIPE" \
  | cat - "$root/tests/python/requirements.txt" | sha)"
slim_dir="$cache/rootfs/bookworm-slim-$slim_key"
agent_rootfs_dir="$cache/rootfs/hermes-agent-$agent_rootfs_key"

declare -A key
piece_key() { # piece_key NAME: the sha of everything the image is made from
  local n="$1"
  case "$n" in
    fleetgate-proxy)
      { sha256sum <"$proxy_bin"; cat "${containerfile[$n]}"; echo "$slim_key $script_key"; } | sha ;;
    fleetgate-controller)
      { sha256sum <"$controller_bin"; cat "${containerfile[$n]}"; echo "$slim_key $script_key"; } | sha ;;
    hermes-agent)
      # Not keyed by this script: the agent depends only on its rootfs and its Containerfile.
      { cat "${containerfile[$n]}"; echo "$agent_rootfs_key"; } | sha ;;
    fleetgate-pause)
      { cat "$here/pause.c" "${containerfile[$n]}"; gcc --version | head -1; echo "$script_key"; } | sha ;;
  esac
}
set_lines=""
for n in "${names[@]}"; do
  if [ "$dir_only" = 1 ] && { { [ "$n" = fleetgate-proxy ] && [ ! -f "$proxy_bin" ]; } \
    || { [ "$n" = fleetgate-controller ] && [ ! -f "$controller_bin" ]; }; }; then
    key[$n]=missing-binary
  else
    key[$n]="$(piece_key "$n")"
  fi
  set_lines+="$n ${key[$n]}"$'\n'
done
dest="$cache/$profile-$(printf '%s' "$set_lines" | sha)"

if [ "$dir_only" = 1 ]; then
  echo "$dest"
  exit 0
fi
set_complete() {
  local n
  [ -f "$dest/BUILD" ] || return 1
  for n in "${names[@]}"; do [ -f "$dest/$n.oci.tar" ] || return 1; done
}
if set_complete; then
  echo "$dest"
  exit 0
fi

[ "$(id -u)" = 0 ] || { say "needs root (debootstrap, chroot, rootful podman)"; exit 1; }
for tool in debootstrap buildah podman objcopy gcc flock; do
  command -v "$tool" >/dev/null || { say "$tool is missing (apt-get install podman buildah debootstrap binutils gcc)"; exit 1; }
done

# Cleanups of the temporary folders still being built, run on any exit.
cleanups=()
cleanup() {
  local c
  for c in "${cleanups[@]}"; do rm -rf "$c"; done
  return 0
}

# with_lock NAME CMD...: runs CMD while holding the cache lock NAME (fd 9).
with_lock() {
  local lock="$cache/.lock-$1"
  shift
  (
    trap cleanup EXIT
    exec 9>"$lock"
    flock 9
    "$@"
  )
}

# --- root filesystems ----------------------------------------------------------------------

debootstrap_into() { # debootstrap_into DIR PACKAGES LOG
  if ! debootstrap --variant=minbase --include="$2" "$SUITE" "$1" "$MIRROR" >>"$3" 2>&1; then
    say "debootstrap failed ($3):"
    tail -40 "$3" >&2
    return 1
  fi
}

make_slim_rootfs() { # bookworm minbase + iptables + CA roots: the source of the FROM-scratch files
  [ -f "$slim_dir/.complete" ] && return 0
  local tmp start log="$cache/rootfs/bookworm-slim-$slim_key.log"
  start=$(now)
  tmp="$(mktemp -d "$cache/rootfs/.build-slim.XXXXXX")"
  cleanups+=("$tmp")
  : >"$log"
  say "debootstrap $SUITE minbase + $SLIM_PACKAGES into $slim_dir ..."
  debootstrap_into "$tmp/rootfs" "$SLIM_PACKAGES" "$log"
  echo "$(($(now) - start))" >"$tmp/seconds"
  touch "$tmp/.complete"
  rm -rf "$slim_dir"
  mv "$tmp" "$slim_dir"
}

make_agent_rootfs() { # bookworm minbase + python3 + the pinned Hermes venv at /opt/hermes
  [ -f "$agent_rootfs_dir/.complete" ] && return 0
  local tmp start r log="$cache/rootfs/hermes-agent-$agent_rootfs_key.log"
  start=$(now)
  tmp="$(mktemp -d "$cache/rootfs/.build-agent.XXXXXX")"
  cleanups+=("$tmp")
  r="$tmp/rootfs"
  : >"$log"
  say "debootstrap $SUITE minbase + $AGENT_PACKAGES, then pip install Hermes $HERMES_VERSION into $agent_rootfs_dir ..."
  debootstrap_into "$r" "$AGENT_PACKAGES" "$log"
  # For the install only: this machine's resolver and the CA roots its pip trusts (a TLS proxy's
  # own CA, say). The image keeps an empty resolv.conf (the pod's is mounted over it) and
  # Debian's own CA roots.
  cp /etc/resolv.conf "$r/etc/resolv.conf"
  cp "${PIP_CERT:-${SSL_CERT_FILE:-/etc/ssl/certs/ca-certificates.crt}}" "$r/tmp/build-ca.crt"
  cp "$root/tests/python/requirements.txt" "$r/tmp/requirements.txt"
  local pass=() v
  for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY PIP_INDEX_URL PIP_EXTRA_INDEX_URL; do
    [ -n "${!v:-}" ] && pass+=("$v=${!v}")
  done
  if ! env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 PIP_CERT=/tmp/build-ca.crt \
    "${pass[@]}" chroot "$r" /bin/sh -euc '
      python3 -m venv /opt/hermes
      /opt/hermes/bin/pip install --no-cache-dir --disable-pip-version-check --upgrade pip
      /opt/hermes/bin/pip install --no-cache-dir --disable-pip-version-check -r /tmp/requirements.txt
      /opt/hermes/bin/hermes --help >/dev/null
      /opt/hermes/bin/python -c "from tools.web_tools import web_extract_tool"
    ' >>"$log" 2>&1; then
    say "the Hermes install in the agent rootfs failed ($log):"
    tail -40 "$log" >&2
    return 1
  fi
  # The agent's user (10000:10000) and its home, the Hermes home the pod mounts over.
  echo "hermes:x:10000:10000:Hermes Agent:/opt/data:/usr/sbin/nologin" >>"$r/etc/passwd"
  echo "hermes:x:10000:" >>"$r/etc/group"
  echo "hermes:*:19000:0:99999:7:::" >>"$r/etc/shadow"
  install -d -o 10000 -g 10000 -m 0755 "$r/opt/data"
  # What an image does not need: the resolver of this machine, apt's lists and downloads, docs.
  : >"$r/etc/resolv.conf"
  rm -rf "$r/tmp/requirements.txt" "$r/tmp/build-ca.crt" "$r/var/lib/apt/lists"/* "$r/var/cache/apt"/*.bin \
    "$r/var/cache/apt/archives"/*.deb "$r/var/log"/*.log "$r/usr/share/doc"/* \
    "$r/usr/share/man"/* "$r/usr/share/info"/* "$r/root/.cache"
  echo "$(($(now) - start))" >"$tmp/seconds"
  touch "$tmp/.complete"
  rm -rf "$agent_rootfs_dir"
  mv "$tmp" "$agent_rootfs_dir"
}

# --- staging the FROM-scratch contexts -----------------------------------------------------

# The libraries ELF files load, as paths inside the slim rootfs, resolved by its own loader,
# into LIBS.
needed_libs() { # needed_libs ELF...
  local r="$slim_dir/rootfs" f out line path
  local libpath="$r/usr/lib/x86_64-linux-gnu:$r/usr/lib64"
  declare -A seen=()
  LIBS=()
  for f in "$@"; do
    out="$("$r/usr/lib64/ld-linux-x86-64.so.2" --library-path "$libpath" --list "$f")" \
      || { say "$f: the bookworm loader could not list its libraries"; exit 1; }
    while read -r line; do
      case "$line" in
        *"=> not found"*) say "$f: ${line%% *} is not in the bookworm rootfs"; exit 1 ;;
        *" => "*) path="${line#* => }"; path="${path%% (*}" ;;
        /*) path="${line%% (*}" ;;
        *) continue ;;
      esac
      case "$path" in
        "$r"/*) path="${path#"$r"}" ;;
        /lib64/ld-linux-x86-64.so.2) path=/usr/lib64/ld-linux-x86-64.so.2 ;;
        *) say "$f: $path resolved outside the bookworm rootfs"; exit 1 ;;
      esac
      [ -n "${seen[$path]:-}" ] && continue
      seen[$path]=1
      LIBS+=("$path")
    done <<<"$out"
  done
}

# Copies one file of the slim rootfs into a stage, following symlinks, under the merged-/usr path.
take() { # take STAGE PATH
  local p="$2"
  case "$p" in /lib/* | /lib64/* | /bin/* | /sbin/*) p="/usr$p" ;; esac
  install -D -m "$(stat -Lc %a "$slim_dir/rootfs$2")" "$slim_dir/rootfs$2" "$1$p"
}

# The skeleton every FROM-scratch stage starts from: merged-/usr links, CA roots, passwd/group.
skeleton() { # skeleton STAGE "passwd lines" "group lines"
  local s="$1"
  mkdir -p "$s/usr/bin" "$s/usr/sbin" "$s/usr/lib/x86_64-linux-gnu" "$s/usr/lib64" "$s/etc/ssl/certs" "$s/usr/local/bin"
  ln -s usr/bin "$s/bin"
  ln -s usr/sbin "$s/sbin"
  ln -s usr/lib "$s/lib"
  ln -s usr/lib64 "$s/lib64"
  take "$s" /etc/ssl/certs/ca-certificates.crt
  take "$s" /etc/protocols
  take "$s" /etc/services
  printf '%s\n' "$2" >"$s/etc/passwd"
  printf '%s\n' "$3" >"$s/etc/group"
  printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$s/etc/nsswitch.conf"
  chmod 0644 "$s/etc/passwd" "$s/etc/group" "$s/etc/nsswitch.conf"
}

stage_binary() { # stage_binary STAGE BINARY NAME: the binary without debug info, plus its libraries
  local lib
  objcopy --strip-debug "$2" "$1/usr/local/bin/$3"
  chmod 0755 "$1/usr/local/bin/$3"
  needed_libs "$1/usr/local/bin/$3"
  for lib in "${LIBS[@]}"; do take "$1" "$lib"; done
}

stage_proxy() { # the gate, iptables (nft and legacy backends, their xtables modules) and uid 15000
  local s="$1/rootfs" r="$slim_dir/rootfs" cmd suffix lib elfs=()
  skeleton "$s" \
    "root:x:0:0:root:/root:/usr/sbin/nologin"$'\n'"fleetgate:x:15000:15000:fleetgate gate:/nonexistent:/usr/sbin/nologin"$'\n'"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin" \
    "root:x:0:"$'\n'"fleetgate:x:15000:"$'\n'"nogroup:x:65534:"
  stage_binary "$s" "$proxy_bin" fleetgate-proxy
  take "$s" /usr/sbin/xtables-nft-multi
  take "$s" /usr/sbin/xtables-legacy-multi
  # Every name init-iptables may exec: {iptables,ip6tables}{-nft,,-legacy}{,-save,-restore}; the
  # unsuffixed ones are the nft backend, as Debian's alternatives default.
  for cmd in iptables ip6tables; do
    for suffix in "" -save -restore; do
      ln -s xtables-nft-multi "$s/usr/sbin/$cmd$suffix"
      ln -s xtables-nft-multi "$s/usr/sbin/$cmd-nft$suffix"
      ln -s xtables-legacy-multi "$s/usr/sbin/$cmd-legacy$suffix"
    done
  done
  mkdir -p "$s/usr/lib/x86_64-linux-gnu/xtables"
  cp -a "$r/usr/lib/x86_64-linux-gnu/xtables/." "$s/usr/lib/x86_64-linux-gnu/xtables/"
  elfs=("$r/usr/sbin/xtables-nft-multi" "$r/usr/sbin/xtables-legacy-multi" "$r/usr/lib/x86_64-linux-gnu/xtables/"*.so)
  needed_libs "${elfs[@]}"
  for lib in "${LIBS[@]}"; do take "$s" "$lib"; done
  # /run: the legacy backend's lock file (the init container mounts an emptyDir there);
  # /etc/fleetgate: where the pod mounts the policy.
  mkdir -p "$s/run" "$s/etc/fleetgate"
}

stage_controller() { # the controller and uid 65532 (nonroot)
  local s="$1/rootfs"
  skeleton "$s" \
    "root:x:0:0:root:/root:/usr/sbin/nologin"$'\n'"nonroot:x:65532:65532:nonroot:/home/nonroot:/usr/sbin/nologin"$'\n'"nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin" \
    "root:x:0:"$'\n'"nonroot:x:65532:"$'\n'"nogroup:x:65534:"
  stage_binary "$s" "$controller_bin" fleetgate-controller
}

stage_pause() { # one static binary
  mkdir -p "$1/rootfs"
  gcc -static -Os -s -Wall -Wextra -Werror -o "$1/rootfs/pause" "$here/pause.c"
}

# --- one image -----------------------------------------------------------------------------

# build_piece NAME: stage, buildah bud, tag, save; into pieces/NAME-KEY/ unless already there.
build_piece() {
  local n="$1" piece="$cache/pieces/$1-${key[$1]}" tmp ctx start secs size_oci size_img
  [ -f "$piece/$n.oci.tar" ] && return 0
  start=$(now)
  tmp="$(mktemp -d "$cache/pieces/.build-$n.XXXXXX")"
  cleanups+=("$tmp")
  case "$n" in
    fleetgate-proxy) make_slim_rootfs; ctx="$tmp/context"; stage_proxy "$ctx" ;;
    fleetgate-controller) make_slim_rootfs; ctx="$tmp/context"; stage_controller "$ctx" ;;
    fleetgate-pause) ctx="$tmp/context"; stage_pause "$ctx" ;;
    hermes-agent) make_agent_rootfs; ctx="$agent_rootfs_dir" ;;
  esac
  say "buildah bud -f ${containerfile[$n]#"$root"/} -> ${tag[$n]}"
  if ! buildah bud --quiet --timestamp 0 --layers=false -f "${containerfile[$n]}" -t "${tag[$n]}" "$ctx" >"$tmp/bud.log" 2>&1; then
    say "buildah bud of $n failed:"
    cat "$tmp/bud.log" >&2
    return 1
  fi
  rm -rf "$tmp/context"
  # podman and buildah share the storage: the tag is in podman's image list now.
  podman save --quiet --format oci-archive -o "$tmp/$n.oci.tar" "${tag[$n]}"
  secs=$(($(now) - start))
  size_oci=$(stat -c %s "$tmp/$n.oci.tar")
  size_img=$(podman image inspect --format '{{.Size}}' "${tag[$n]}")
  printf '%s %s oci-archive=%s unpacked=%s built-in=%ss\n' \
    "${tag[$n]}" "${key[$n]}" "$size_oci" "$size_img" "$secs" >"$tmp/PIECE"
  rm -rf "$piece"
  mv "$tmp" "$piece"
  say "built ${tag[$n]} in ${secs}s ($size_oci bytes archived)"
}

# --- the set -------------------------------------------------------------------------------

start=$(now)
build_all() {
  local n
  # The images themselves: one lock for the whole cache, so two builds never share a tag.
  for n in "${names[@]}"; do build_piece "$n"; done
  set_complete && return 0
  local tmp
  tmp="$(mktemp -d "$cache/.build-set.XXXXXX")"
  cleanups+=("$tmp")
  {
    echo "fleetgate images, profile $profile, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "binaries: ${proxy_bin:-none} ${controller_bin:-none}"
    [ -f "$slim_dir/seconds" ] && echo "rootfs bookworm-slim-$slim_key: debootstrap took $(cat "$slim_dir/seconds")s (when first built)"
    [ -f "$agent_rootfs_dir/seconds" ] && echo "rootfs hermes-agent-$agent_rootfs_key: debootstrap + pip took $(cat "$agent_rootfs_dir/seconds")s (when first built)"
    echo "this run: $(($(now) - start))s"
    echo "image key bytes (oci-archive, unpacked) piece build time (when first built):"
    for n in "${names[@]}"; do
      ln "$cache/pieces/$n-${key[$n]}/$n.oci.tar" "$tmp/$n.oci.tar"
      cat "$cache/pieces/$n-${key[$n]}/PIECE"
    done
  } >"$tmp/BUILD"
  chmod 755 "$tmp"
  rm -rf "$dest"
  mv "$tmp" "$dest"
}
with_lock images build_all
# A piece can be cached while its tag was removed from podman's storage: restore the tags.
for n in "${names[@]}"; do
  podman image exists "${tag[$n]}" || podman load --quiet -i "$dest/$n.oci.tar" >&2
done
say "done in $(($(now) - start))s"
echo "$dest"
