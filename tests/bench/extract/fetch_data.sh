#!/usr/bin/env bash
# Bring the extraction benchmark's pages and ground truth into the machine cache
# ($FLEETGATE_EXTRACT_DATA, default ~/.cache/fleetgate/extract-data/<dataset>/), check every
# file against the sha256 sums committed in tests/bench/extract/data.sha256, then derive the
# ground-truth text and the UTF-8 pages the way the WCEB benchmark's dataset readers do
# (prepare.py). None of the data is committed to this repository: only the hashes.
#
#   tests/bench/extract/fetch_data.sh                  copy + verify + prepare (idempotent)
#   tests/bench/extract/fetch_data.sh --write-manifest rewrite data.sha256 from a fresh copy
#
# Source. The WCEB collection (github.com/chatnoir-eu/web-content-extraction-benchmark) keeps
# its datasets as Git LFS archives (datasets/raw.tar.xz, combined.tar.xz), which a repository
# snapshot does not carry. The same original datasets, in their original formats, are in the
# public repository j-szulc/html-cleaning-dataset-merged (pinned below): CleanEval (dev + final),
# CleanPortalEval, Dragnet, L3S-GN1 (Google News, via page-signal) and the Readability test
# pages. CETD and Google-Trends-2017 are in no reachable snapshot and are not part of the run;
# the ScrapingHub benchmark's data is never used.
#
# Where the mirror is looked for, in order: $FLEETGATE_EXTRACT_MIRROR (a git directory, bare or a
# clone's .git, or a clone's work tree), /work/.mirror/j-szulc+html-cleaning-dataset-merged/repo.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=env.sh
source "$here/env.sh"

repo_name=j-szulc/html-cleaning-dataset-merged
commit=46e01a04b47051838a228bf23631430b2c9de375
manifest="$here/data.sha256"
cache="$FLEETGATE_EXTRACT_DATA"

# dataset  source folder in the mirror  name prefix
sources=(
  "cleaneval cleaneval-dev dev-"
  "cleaneval cleaneval-final final-"
  "cleanportaleval CleanPortalEval-master -"
  "dragnet dragnet_data -"
  "l3s-gn1 page-signal-master -"
  "readability readability -"
)

no_mirror() {
  cat >&2 <<MSG
extract bench: the dataset mirror was not found, so no data was fetched.
  The pages come from the public GitHub repository $repo_name at commit $commit.
  Bring a copy of it onto this machine, then run this script again:
    - in a session with the fetch tool: fetch github:$repo_name (it lands under
      /work/.mirror/j-szulc+html-cleaning-dataset-merged/repo, where this script looks), or
    - anywhere with git access: git clone https://github.com/$repo_name and
      export FLEETGATE_EXTRACT_MIRROR=/path/to/html-cleaning-dataset-merged
  Nothing else is downloaded; the files are checked against $manifest.
MSG
  exit 1
}

find_mirror() {
  local c
  for c in "${FLEETGATE_EXTRACT_MIRROR:-}" /work/.mirror/j-szulc+html-cleaning-dataset-merged/repo; do
    [ -n "$c" ] || continue
    [ -d "$c/.git" ] && c="$c/.git"
    if git --git-dir="$c" cat-file -e "$commit^{commit}" 2>/dev/null; then
      echo "$c"
      return 0
    fi
    [ -d "$c" ] && echo "extract bench: $c has no commit $commit" >&2
  done
  return 1
}

copy_raw() {
  local mirror=$1 dest=$2 tmp line ds dir prefix f stem
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  git --git-dir="$mirror" archive --format=tar "$commit" \
    cleaneval-dev cleaneval-final CleanPortalEval-master dragnet_data page-signal-master readability \
    | tar -x -C "$tmp"
  for line in "${sources[@]}"; do
    read -r ds dir prefix <<<"$line"
    [ "$prefix" = - ] && prefix=
    mkdir -p "$dest/$ds/raw/input" "$dest/$ds/raw/gold"
    for f in "$tmp/$dir/GoldStandard/"*.txt; do
      stem=$(basename "$f" .txt)
      [ -f "$tmp/$dir/input/$stem.html" ] || continue # only pages with a ground truth
      cp "$f" "$dest/$ds/raw/gold/$prefix$stem.txt"
      cp "$tmp/$dir/input/$stem.html" "$dest/$ds/raw/input/$prefix$stem.html"
    done
  done
}

if [ "${1:-}" = --write-manifest ]; then
  mirror=$(find_mirror) || no_mirror
  out=$(mktemp -d)
  copy_raw "$mirror" "$out"
  (cd "$out" && find . -type f -path '*/raw/*' | sed 's#^\./##' | LC_ALL=C sort | xargs sha256sum) >"$manifest"
  rm -rf "$out"
  echo "wrote $manifest ($(wc -l <"$manifest") files)"
  exit 0
fi

stamp_raw="$cache/.raw-$(sha256sum "$manifest" | cut -c1-16)"
if [ ! -f "$stamp_raw" ]; then
  mirror=$(find_mirror) || no_mirror
  extract_log "copying the datasets from $mirror into $cache"
  mkdir -p "$cache"
  rm -rf "$cache".part
  copy_raw "$mirror" "$cache.part"
  (cd "$cache.part" && sha256sum --quiet --strict -c "$manifest") || {
    echo "extract bench: the copied files do not match $manifest; the cache was left unchanged" >&2
    rm -rf "$cache.part"
    exit 1
  }
  for d in "$cache.part"/*/; do
    ds=$(basename "$d")
    rm -rf "${cache:?}/$ds"
    mv "$d" "$cache/$ds"
  done
  rm -rf "$cache.part" "$cache"/.raw-* "$cache"/.prepared-*
  touch "$stamp_raw"
fi

ensure_extract_venv
stamp_prep="$cache/.prepared-$(cat "$manifest" "$here/prepare.py" "$here/requirements.txt" | sha256sum | cut -c1-16)"
if [ ! -f "$stamp_prep" ]; then
  extract_log "deriving the ground truth and UTF-8 pages (prepare.py)"
  "$EXTRACT_PY" "$here/prepare.py" "$cache"
  rm -f "$cache"/.prepared-*
  touch "$stamp_prep"
fi
"$EXTRACT_PY" "$here/prepare.py" --summary "$cache"
