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

# The datasets' central store on a JuiceFS volume (SQLite metadata, objects
# on this disk) mounted over FUSE, when it can be; else a plain directory.
# The mount outlives the server: scripts/juicefs.sh stop data/juicefs data/juicefs-mnt
if [ -z "${GANTRY_DATASETS_CENTRAL_DIR:-}${GANTRY_DATASETS_S3_ENDPOINT:-}" ]; then
  data=${GANTRY_DATA_DIR:-data}
  case "$data" in /*) ;; *) data=$PWD/$data ;; esac
  if bash scripts/juicefs.sh bin >/dev/null 2>&1 && bash scripts/juicefs.sh format "$data/juicefs" \
     && bash scripts/juicefs.sh mount "$data/juicefs" "$data/juicefs-mnt"; then
    export GANTRY_DATASETS_CENTRAL_DIR=$data/juicefs-mnt/central
    echo "[run] dataset central store: JuiceFS volume $data/juicefs, mounted at $data/juicefs-mnt"
  else
    echo "[run] JuiceFS unavailable (not installed, or no usable /dev/fuse): the dataset central store is the plain directory $data/datasets/central"
  fi
fi

cargo leptos build --release --precompress
bash scripts/regzip.sh target/site
exec target/release/gantry serve "$@"
