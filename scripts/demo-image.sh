#!/usr/bin/env bash
# Builds Gantry's demo dev-machine image locally (there is no registry here):
# a tiny rootfs made from Debian's busybox-static, imported with
# `docker import`. Idempotent: skips when the image (at this revision) exists.
set -euo pipefail
image=${GANTRY_DEMO_IMAGE:-gantry/devbox:latest}
# Revision 2 adds OpenSSH's sftp-server (the SSH gateway's scp/sftp, issue
# #34); an older image is rebuilt.
rev=2
if [ "$(docker image inspect -f '{{ index .Config.Labels "gantry.devbox.rev" }}' "$image" 2>/dev/null)" = "$rev" ]; then
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
# OpenSSH's sftp-server from the host's Debian package (openssh-sftp-server,
# which scripts/setup.sh installs) with the shared libraries it links, so
# `scp` and `sftp` work through the gateway.
sftp=/usr/lib/openssh/sftp-server
if [ ! -x "$sftp" ]; then
  echo "[image] $sftp missing: install openssh-sftp-server (scripts/setup.sh does)" >&2
  exit 1
fi
mkdir -p "$root/usr/lib/openssh"
cp "$sftp" "$root$sftp"
for lib in $(ldd "$sftp" | grep -o '/[^ ]*'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"
tar -C "$root" -c . | docker import \
  --change 'CMD ["/bin/sh", "-c", "trap \"exit 0\" TERM; while :; do sleep 3600 & wait $!; done"]' \
  --change 'WORKDIR /root' \
  --change 'ENV PATH=/bin' \
  --change "LABEL gantry.devbox.rev=$rev" \
  --message 'Gantry demo dev machine (busybox-static)' - "$image" >/dev/null
echo "[image] built $image"
