#!/usr/bin/env bash
# Runs every test: core unit and property tests, SQLite integration tests,
# HTTP tests against the real server, real-Docker tests, and end-to-end
# tests in Debian's Chromium. Exits non-zero if anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

echo "== Docker Engine"
bash scripts/dockerd.sh
docker info --format 'engine {{.ServerVersion}}, storage {{.Driver}}, runtimes {{json .Runtimes}}' \
  | sed 's/{"[^}]*}//g'
bash scripts/demo-image.sh

echo "== Rust tests (core, platform, app, server)"
cargo test --locked -p gantry-core -p gantry-platform -p app -p server --features app/ssr

echo "== End-to-end tests (Chromium)"
# A full cargo-leptos build: a server binary from `cargo test` paired with a
# frontend-only bundle was seen to fail hydration.
cargo leptos build
(cd end2end && npx playwright test)
