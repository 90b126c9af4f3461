#!/usr/bin/env bash
# Builds Gantry in release mode and serves it on GANTRY_LISTEN
# (default 127.0.0.1:3000) with its state in GANTRY_DATA_DIR (default ./data).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

# A local Docker Engine runs the dev machines when one can be started.
if bash scripts/dockerd.sh; then
  bash scripts/demo-image.sh || echo "[run] could not build the demo image; see above"
else
  echo "[run] no Docker Engine: dev machines will use the simulated executor"
fi

cargo leptos build --release --precompress
exec target/release/gantry serve "$@"
