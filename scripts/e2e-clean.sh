#!/usr/bin/env bash
# Removes what an end-to-end run's server left on the local Docker Engine:
# its machines' containers and volumes (by the installation's label, read
# from the run's database — nothing of any other installation), and the
# loop devices of its volume images. The end-to-end server is stopped
# without deleting its machines, and the next run starts by removing the
# data directory: without this, every run would leave its containers
# behind and their images attached to loop devices, deleted, for ever.
# Usage: scripts/e2e-clean.sh [DATA_DIR]   (default target/e2e-data)
set -u
data=${1:-target/e2e-data}
db=$data/gantry.db
[ -f "$db" ] || exit 0
id=$(python3 - "$db" <<'EOF'
import sqlite3, sys
row = sqlite3.connect(sys.argv[1]).execute("SELECT value FROM settings WHERE key = 'instance_id'").fetchone()
print(row[0] if row else "")
EOF
) || exit 0
# An instance id is 8 hex digits (migration 0002): anything else is not ours.
[[ $id =~ ^[0-9a-f]{8}$ ]] || exit 0
if docker info >/dev/null 2>&1; then
  docker ps -aq --filter "label=gantry.instance=$id" | xargs -r docker rm -f >/dev/null
  docker volume ls -q --filter "label=gantry.instance=$id" | xargs -r docker volume rm -f >/dev/null
fi
for image in "$data"/volumes/gantry-"$id"-m*-data.img; do
  [ -e "$image" ] || continue
  for device in $(losetup -j "$image" -O NAME -n 2>/dev/null); do
    [[ $device =~ ^/dev/loop[0-9]+$ ]] && losetup -d "$device" 2>/dev/null
  done
done
exit 0
