#!/usr/bin/env bash
# Builds Gantry's demo dev-machine image locally (there is no registry here):
# a tiny rootfs made from Debian's busybox-static, imported with
# `docker import`. Idempotent: skips when the image exists.
set -euo pipefail
image=${GANTRY_DEMO_IMAGE:-gantry/devbox:latest}
if docker image inspect "$image" >/dev/null 2>&1; then
  echo "[image] $image present"
  exit 0
fi
# Debian's busybox-static installs a statically linked /bin/busybox, which
# runs inside an image that has no libc.
busybox=/bin/busybox
if [ ! -x "$busybox" ]; then
  echo "[image] $busybox missing: install busybox-static (scripts/setup.sh does)" >&2
  exit 1
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root"/{bin,etc,root,tmp,data,proc,sys,dev}
cp "$busybox" "$root/bin/busybox"
# One link per applet so `sh`, `ls`, `sleep`, `df`… exist in the image.
for applet in $("$root/bin/busybox" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$root/bin/$applet"
done
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"
tar -C "$root" -c . | docker import \
  --change 'CMD ["/bin/sh", "-c", "trap \"exit 0\" TERM; while :; do sleep 3600 & wait $!; done"]' \
  --change 'WORKDIR /root' \
  --change 'ENV PATH=/bin' \
  --message 'Gantry demo dev machine (busybox-static)' - "$image" >/dev/null
echo "[image] built $image"
