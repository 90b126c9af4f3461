#!/usr/bin/env bash
# Prints the size of the browser bundle as a release build ships it: the
# wasm built with the `wasm-release` profile (opt-level z, fat LTO, one
# codegen unit, panic=abort), bound by wasm-bindgen and shrunk by
# `wasm-opt -Oz` as cargo-leptos does, plus the JS glue, the CSS and
# `live.js` with the Idiomorph module it imports (every page loads both; the
# wasm only pages with islands) — raw,
# gzip -9 and brotli -q 11. A figure, not a test: nothing here fails on size.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PWD/node_modules/.bin:$PATH"
target=${CARGO_TARGET_DIR:-target}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# As `cargo leptos build --release` does (`always-erase-components`), with the
# cfg in its own target directory so the flag does not rebuild the main one.
RUSTFLAGS="--cfg erase_components" CARGO_TARGET_DIR="$target/wasm-erased" \
  cargo build --locked -q -p frontend --lib --target wasm32-unknown-unknown --profile wasm-release
wasm-bindgen --target web --no-typescript --out-dir "$out" --out-name gantry \
  "$target/wasm-erased/wasm32-unknown-unknown/wasm-release/frontend.wasm"
wasm-opt -Oz --enable-bulk-memory --enable-nontrapping-float-to-int --enable-sign-ext \
  "$out/gantry_bg.wasm" -o "$out/gantry_bg.opt.wasm"
mv "$out/gantry_bg.opt.wasm" "$out/gantry_bg.wasm"
cp style/main.css "$out/gantry.css"
cp public/live.js "$out/live.js"
cp node_modules/idiomorph/dist/idiomorph.esm.js "$out/idiomorph.js"

printf '%-16s %10s %10s %10s\n' file raw gzip brotli
total_raw=0 total_gz=0 total_br=0
for f in gantry_bg.wasm gantry.js gantry.css live.js idiomorph.js; do
  raw=$(stat -c %s "$out/$f")
  gz=$(gzip -9 -c "$out/$f" | wc -c)
  br=$(brotli -q 11 -c "$out/$f" | wc -c)
  printf '%-16s %10s %10s %10s\n' "$f" "$raw" "$gz" "$br"
  total_raw=$((total_raw + raw)) total_gz=$((total_gz + gz)) total_br=$((total_br + br))
done
printf '%-16s %10s %10s %10s\n' total "$total_raw" "$total_gz" "$total_br"
