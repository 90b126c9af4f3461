#!/usr/bin/env bash
# Makes sure a Docker Engine answers on the default socket: if `docker info`
# fails, start Debian's dockerd with the flags that work in this sandbox
# (vfs storage, no iptables, no default bridge) and wait until it answers.
# Prints the PID file path of a daemon it started.
set -euo pipefail
if docker info >/dev/null 2>&1; then
  echo "[dockerd] engine already answering"
  exit 0
fi
state=${GANTRY_DOCKERD_DIR:-/tmp/gantry-dockerd}
mkdir -p "$state"
if [ -f "$state/dockerd.pid" ] && kill -0 "$(cat "$state/dockerd.pid")" 2>/dev/null; then
  echo "[dockerd] started earlier (pid $(cat "$state/dockerd.pid")), waiting for it"
else
  echo "[dockerd] starting dockerd (log: $state/dockerd.log)"
  setsid dockerd --storage-driver vfs --iptables=false --ip6tables=false --bridge=none \
    --pidfile "$state/dockerd.pid" >"$state/dockerd.log" 2>&1 < /dev/null &
fi
for _ in $(seq 1 120); do
  if docker info >/dev/null 2>&1; then
    echo "[dockerd] engine answering: $(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')"
    exit 0
  fi
  sleep 0.5
done
echo "[dockerd] engine did not answer within 60 s; last log lines:" >&2
tail -n 20 "$state/dockerd.log" >&2
exit 1
