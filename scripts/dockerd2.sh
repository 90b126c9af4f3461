#!/usr/bin/env bash
# A second Docker Engine on this machine, on its own socket, so tests can
# add a second worker node (and mark it lost) without touching the first.
# Idempotent: reuses a daemon it started earlier. Copies the demo image
# across from the default engine (there is no registry to pull from).
#
#   bash scripts/dockerd2.sh        start; the last stdout line is the endpoint
#   bash scripts/dockerd2.sh stop   stop the daemon named in its pidfile
#
# State lives in $GANTRY_DOCKERD2_DIR (default /tmp/gantry-dockerd2).
set -euo pipefail
dir=${GANTRY_DOCKERD2_DIR:-/tmp/gantry-dockerd2}
sock="unix://$dir/docker.sock"
pidfile="$dir/dockerd.pid"
image=${GANTRY_DEMO_IMAGE:-gantry/devbox:latest}

running_pid() {
  # The PID from the pidfile, only if that process is still alive.
  [ -f "$pidfile" ] || return 1
  local pid
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

if [ "${1:-}" = stop ]; then
  if pid=$(running_pid); then
    echo "[dockerd2] stopping pid $pid"
    kill "$pid"
    # dockerd stops its containers first; give it a while before giving up.
    for _ in $(seq 1 60); do
      if ! kill -0 "$pid" 2>/dev/null; then
        # Mounts the daemon left under its state (so the caller can remove
        # the directory): deepest first, lazily.
        awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
        echo "[dockerd2] stopped"
        exit 0
      fi
      sleep 0.5
    done
    echo "[dockerd2] pid $pid still running after 30 s" >&2
    exit 1
  fi
  echo "[dockerd2] not running"
  exit 0
fi

mkdir -p "$dir"
if pid=$(running_pid); then
  echo "[dockerd2] started earlier (pid $pid)"
else
  echo "[dockerd2] starting dockerd on $sock (log: $dir/dockerd.log)"
  setsid dockerd --storage-driver vfs --iptables=false --ip6tables=false --bridge=none \
    -H "$sock" --data-root "$dir/root" --exec-root "$dir/exec" --pidfile "$pidfile" \
    >"$dir/dockerd.log" 2>&1 </dev/null &
fi
answered=
for _ in $(seq 1 120); do
  if docker -H "$sock" info >/dev/null 2>&1; then
    answered=1
    break
  fi
  sleep 0.5
done
if [ -z "$answered" ]; then
  echo "[dockerd2] engine on $sock did not answer within 60 s; last log lines:" >&2
  tail -n 20 "$dir/dockerd.log" >&2
  exit 1
fi
if docker -H "$sock" image inspect "$image" >/dev/null 2>&1; then
  echo "[dockerd2] $image present"
else
  echo "[dockerd2] copying $image from the default engine"
  docker save "$image" | docker -H "$sock" load >/dev/null
fi
echo "$sock"
