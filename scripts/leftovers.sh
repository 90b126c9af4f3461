#!/usr/bin/env bash
# What a test run must not leave behind: Gantry-managed containers and
# volumes (label gantry.managed=true) on the local engine and the second
# one, and loop devices. `snapshot FILE` records what is there before the
# tests (a developer's own `make run` machines stay out of it); `check FILE`
# lists what is there now and was not then, and fails if anything is.
# Usage: scripts/leftovers.sh snapshot|check FILE
set -euo pipefail
mode=$1 file=$2

list() {
  local engine
  for engine in "" "${GANTRY_DOCKERD2_ENDPOINT:-}"; do
    local h=()
    if [ -n "$engine" ]; then h=(-H "$engine"); fi
    docker "${h[@]}" info >/dev/null 2>&1 || continue
    docker "${h[@]}" ps -a --filter label=gantry.managed=true --format 'container {{.Names}} {{.Labels}}' | sed "s|^|${engine:-local} |"
    docker "${h[@]}" volume ls --filter label=gantry.managed=true --format 'volume {{.Name}}' | sed "s|^|${engine:-local} |"
  done
  losetup -n -O NAME,BACK-FILE --list 2>/dev/null | sed 's|^|loop |' || true
}

case $mode in
  snapshot) list | sort > "$file" ;;
  check)
    left=$(comm -13 "$file" <(list | sort))
    if [ -n "$left" ]; then
      echo "!! the test run left these behind (every test removes what it made):" >&2
      echo "$left" >&2
      exit 1
    fi
    echo "nothing left behind: no container, volume or loop device of this run"
    ;;
  *) echo "usage: $0 snapshot|check FILE" >&2; exit 2 ;;
esac
