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

# The whole run's budget (CI allows 90 minutes on a fresh 2-core machine; a
# fresh run takes about 25): no stage may run past it, so a run that is
# slow rather than hung still ends with a message naming the stage, not
# killed from outside without one.
budget=${GANTRY_TEST_BUDGET_SECS:-5100}

# stage NAME SECONDS COMMAND...: runs COMMAND, killed after SECONDS (or
# when the run's budget is spent, whichever comes first).
stage() {
  local name=$1 limit=$2
  shift 2
  local left=$((budget - SECONDS)) why="within ${limit} s: it hangs or is far too slow"
  if [ "$left" -lt "$limit" ]; then
    limit=$((left > 1 ? left : 1)) why="before the whole run's budget of ${budget} s was spent"
  fi
  echo "== $name (limit ${limit} s)"
  local started=$SECONDS rc=0
  timeout --kill-after=20 "$limit" "$@" || rc=$?
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    echo "!! stage '$name' did not finish $why" >&2
  fi
  # The disk's free space with every outcome: a full disk shows up as odd
  # failures (the linker dying of SIGBUS), not as a message saying so.
  local free
  free=$(df -h --output=avail . 2>/dev/null | tail -n1 | tr -d ' ') || true
  if [ "$rc" != 0 ]; then
    echo "!! stage '$name' failed (exit $rc); ${free:-?} free on this disk" >&2
    exit "$rc"
  fi
  echo "== $name: done in $((SECONDS - started)) s (${free:-?} free on this disk)"
}

# First use on a fresh machine installs the toolchain (apt, cargo-leptos,
# wasm-bindgen, npm, pip); later runs find it and take seconds.
# Unlike `make run`, the tests need JuiceFS (datasets_juicefs.rs): a failed
# install fails the set-up here, with its reason, not a test later.
stage "set-up (scripts/setup.sh)" 2400 env GANTRY_REQUIRE_JUICEFS=1 bash scripts/setup.sh

stage "Docker Engine" 120 bash scripts/dockerd.sh
stage "Docker Engine info" 30 bash -c "set -o pipefail; docker info --format 'engine {{.ServerVersion}}, storage {{.Driver}}, runtimes {{json .Runtimes}}' | sed 's/{\"[^}]*}//g'"
stage "demo image" 120 bash scripts/demo-image.sh
# A second engine on its own socket: a second worker node (region) for the
# node-lifecycle and two-region tests. Stopped (by its pidfile) when we
# leave — also if it fails half-way through starting — and its state wiped:
# every run is a new installation, so what an earlier run left there would
# never be collected.
trap 'bash scripts/dockerd2.sh stop >/dev/null 2>&1 && rm -rf "${GANTRY_DOCKERD2_DIR:-/tmp/gantry-dockerd2}"' EXIT
node2_file=$(mktemp)
stage "second Docker Engine" 180 bash -c 'set -o pipefail; bash scripts/dockerd2.sh | tail -n1 > "$1"' _ "$node2_file"
node2=$(cat "$node2_file")
rm -f "$node2_file"
export GANTRY_DOCKERD2_ENDPOINT=$node2
# What is on the engines before the tests; the last check compares.
before_tests=$(mktemp)
stage "note what the engines hold before the tests" 60 bash scripts/leftovers.sh snapshot "$before_tests"

rust_crates=(-p gantry-core -p gantry-platform -p gantry-testkit -p app -p server -p gantry-bench --features app/ssr)
# The habits the code is held to, before any test runs: one format
# (rustfmt.toml) and no clippy warning in any crate, tests included, and in
# the browser build of the island (frontend, wasm32).
stage "format and lints (rustfmt, clippy -D warnings)" 1500 bash -c '
  set -e
  cargo fmt --all --check
  cargo clippy --locked --all-targets "$@" -- -D warnings
  cargo clippy --locked -p frontend --target wasm32-unknown-unknown -- -D warnings
' _ "${rust_crates[@]}"
stage "build the Rust tests" 2400 cargo test --locked --no-run "${rust_crates[@]}"
stage "Rust tests (core, platform, app, server)" 1200 cargo test --locked "${rust_crates[@]}"

# A full cargo-leptos build: a server binary from `cargo test` paired with a
# frontend-only bundle was seen to fail hydration.
stage "build the site (cargo leptos build)" 1800 cargo leptos build
(cd end2end && stage "End-to-end tests (Chromium)" 900 env GANTRY_E2E_NODE2_ENDPOINT="$node2" npx playwright test)
stage "remove the end-to-end run's machines" 120 bash scripts/e2e-clean.sh "${GANTRY_E2E_DATA_DIR:-target/e2e-data}"
stage "nothing left behind (containers, volumes, loop devices)" 60 bash scripts/leftovers.sh check "$before_tests"

# A figure, not a threshold: the release bundle's raw/gzip/brotli bytes.
stage "release bundle size (a figure)" 1500 bash scripts/bundle-size.sh
