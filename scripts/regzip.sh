#!/usr/bin/env bash
# Rewrites the `.gz` files that `cargo leptos build --precompress` made
# under a site directory at `gzip -9`: cargo-leptos compresses with
# libflate, whose output for the wasm is about a fifth larger (1.10 MB
# against 0.91 MB), and that is what a browser without brotli downloads.
# A file is replaced only by a smaller one, and through a rename, so a
# server reading the directory never sees half a file.
set -euo pipefail
site=${1:?usage: regzip.sh SITE_DIR}
find "$site" -type f -name '*.gz' -print0 | while IFS= read -r -d '' gz; do
  plain=${gz%.gz}
  [ -f "$plain" ] || continue
  tmp=$gz.tmp.$$
  gzip -9 -n -c "$plain" > "$tmp"
  if [ "$(stat -c %s "$tmp")" -lt "$(stat -c %s "$gz")" ]; then mv -f "$tmp" "$gz"; else rm -f "$tmp"; fi
done
