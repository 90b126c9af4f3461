#!/usr/bin/env bash
# Runs every test: core unit and property tests, SQLite integration tests,
# HTTP tests against the real server, real-Docker tests (one and two
# engines), and end-to-end tests in Debian's Chromium. Exits non-zero if
# anything fails. Every stage has a time limit: a hang fails the stage with
# a message naming it instead of holding the run (each test also has its
# own limit, see testkit/).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
# A test run builds once: incremental caches would only add gigabytes
# (24 GB were seen here) to a machine's disk. Developers may set it to 1.
export CARGO_INCREMENTAL=${CARGO_INCREMENTAL:-0}

# stage NAME SECONDS COMMAND...: runs COMMAND, killed after SECONDS.
stage() {
  local name=$1 limit=$2
  shift 2
  echo "== $name (limit ${limit} s)"
  local started=$SECONDS rc=0
  timeout --kill-after=20 "$limit" "$@" || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "!! stage '$name' did not finish within ${limit} s: it hangs or is far too slow" >&2
  fi
  [ "$rc" = 0 ] || exit "$rc"
  echo "== $name: done in $((SECONDS - started)) s"
}

stage "Docker Engine" 120 bash scripts/dockerd.sh
docker info --format 'engine {{.ServerVersion}}, storage {{.Driver}}, runtimes {{json .Runtimes}}' \
  | sed 's/{"[^}]*}//g'
stage "demo image" 120 bash scripts/demo-image.sh
# A second engine on its own socket: a second worker node (region) for the
# node-lifecycle and two-region tests. Stopped (by its pidfile) when we
# leave, and its state wiped: every run is a new installation, so what an
# earlier run left there would never be collected.
node2=$(timeout 180 bash scripts/dockerd2.sh | tail -n1)
export GANTRY_DOCKERD2_ENDPOINT=$node2
trap 'bash scripts/dockerd2.sh stop >/dev/null 2>&1 && rm -rf "${GANTRY_DOCKERD2_DIR:-/tmp/gantry-dockerd2}"' EXIT

rust_crates=(-p gantry-core -p gantry-platform -p gantry-testkit -p app -p server --features app/ssr)
stage "build the Rust tests" 2400 cargo test --locked --no-run "${rust_crates[@]}"
stage "Rust tests (core, platform, app, server)" 1200 cargo test --locked "${rust_crates[@]}"

# A full cargo-leptos build: a server binary from `cargo test` paired with a
# frontend-only bundle was seen to fail hydration.
stage "build the site (cargo leptos build)" 1800 cargo leptos build
(cd end2end && stage "End-to-end tests (Chromium)" 900 env GANTRY_E2E_NODE2_ENDPOINT="$node2" npx playwright test)

# A figure, not a threshold: the release bundle's raw/gzip/brotli bytes.
stage "release bundle size (a figure)" 1500 bash scripts/bundle-size.sh
