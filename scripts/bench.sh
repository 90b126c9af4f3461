#!/usr/bin/env bash
# Prints Gantry's performance figures (nothing here is a test):
#  1. admissions/s through the real admission path on a simulated 1,000-node x 8-GPU cluster;
#  2. 20 dev machines created at once on the local Docker Engine vs raw Engine API calls;
#  3. the browser terminal: keystroke echo through Gantry next to `docker exec -it`, memory per open terminal;
#  4. compute-task matching decisions and a matcher pass over 10,000 queued tasks;
#  5. every portal page (20 machines/200 tasks, then 5,000/50,000) and a static asset under wrk load from a second process.
#  6. a 2 GiB dataset upload into both directory stores over loopback next to two cp's of the file, and peak memory.
#  7. GPU telemetry: ingest rate, node charts, cluster overview, bytes per GPU-day;
#  8. the release wasm bundle's raw, gzip and brotli sizes.
# Needs the release build (`make build`); uses only 127.0.0.1 and the Docker socket.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/gantry
bench=target/release/gantry-bench
[ -x "$bin" ] && [ -x "$bench" ] || { echo "run 'make build' first" >&2; exit 1; }

echo "== 1. admissions"
"$bench" admissions --nodes 1000 --gpus-per-node 8 --requests 8000

echo "== 2. dev machines on Docker"
if bash scripts/dockerd.sh >/dev/null && bash scripts/demo-image.sh >/dev/null; then
  "$bench" docker --machines 20
  GANTRY_LOOP_VOLUMES=0 "$bench" docker --machines 20
else
  echo "no Docker Engine: skipped"
fi

echo "== 3. browser terminal: keystroke echo next to docker exec -it, memory per open terminal"
if bash scripts/dockerd.sh >/dev/null && bash scripts/demo-image.sh >/dev/null; then
  "$bench" terminal --keystrokes 1000 --terminals 50
else
  echo "no Docker Engine: skipped"
fi

echo "== 4. compute-task matching: decisions on 100 regions x 100 nodes x 8 GPUs, a queue pass over 10,000 tasks"
"$bench" matching

echo "== 5. HTTP under load (wrk -t2 -c64 -d10s): every portal page, signed in as admin"
# Two databases: 20 machines and 200 tasks, then 5,000 machines and 50,000
# tasks (rows seeded straight into the tables by scripts/bench-seed.py).
pages="/ /machines /tasks /compute /datasets /tokens /admin /admin/groups /admin/nodes /admin/audit"
port=3411
bench_pages() { # MACHINES TASKS PAGE_CACHE_MS
  local data server cookie
  data=$(mktemp -d)
  GANTRY_PAGE_CACHE_MS=$3 GANTRY_DATA_DIR=$data GANTRY_LISTEN=127.0.0.1:$port GANTRY_ADMIN_PASSWORD=bench-password-1 \
    GANTRY_EXECUTOR=simulated RUST_LOG=warn "$bin" serve >"$data/server.log" 2>&1 &
  server=$!
  for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
  python3 scripts/bench-seed.py "$data/gantry.db" "$1" "$2"
  cookie=$(curl -s -o /dev/null -D - -H "Origin: http://127.0.0.1:$port" \
    --data 'username=admin&password=bench-password-1' "http://127.0.0.1:$port/api/login" \
    | sed -n 's/^set-cookie: \(gantry_session=[^;]*\).*/\1/ip')
  printf '%-16s %12s %10s %10s %10s\n' page req/s p50 p99 bytes
  for page in $pages; do
    bytes=$(curl -s -H "Cookie: $cookie" "http://127.0.0.1:$port$page" | wc -c)
    wrk -t2 -c64 -d10s --latency -H "Cookie: $cookie" "http://127.0.0.1:$port$page" \
      | awk -v page="$page" -v bytes="$bytes" '/Requests\/sec/ {rps=$2} /^ +50%/ {p50=$2} /^ +99%/ {p99=$2} /Non-2xx/ {bad=$NF}
          END {printf "%-16s %12s %10s %10s %10s%s\n", page, rps, p50, p99, bytes, (bad ? "  NON-2XX: " bad : "")}'
  done
  kill "$server"; wait "$server" 2>/dev/null || true
  rm -rf "$data"
}
# Each database twice: as served (a page rendered once is served again
# while nothing was committed, for up to a second), then rendering every
# request (GANTRY_PAGE_CACHE_MS=0) — what a page costs when it changed.
echo "-- 20 machines, 200 tasks"
bench_pages 20 200 1000
echo "-- 20 machines, 200 tasks, every request rendered"
bench_pages 20 200 0
echo "-- 5,000 machines, 50,000 tasks"
bench_pages 5000 50000 1000
echo "-- 5,000 machines, 50,000 tasks, every request rendered"
bench_pages 5000 50000 0

echo "-- a hashed static asset (gzip)"
data=$(mktemp -d)
GANTRY_DATA_DIR=$data GANTRY_LISTEN=127.0.0.1:$port GANTRY_ADMIN_PASSWORD=bench-password-1 \
  GANTRY_EXECUTOR=simulated RUST_LOG=warn "$bin" serve >"$data/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
css=$(ls target/site/pkg/*.css | head -n1 | sed 's|target/site||')
curl -s -o /dev/null -D - -H 'Accept-Encoding: gzip, br' "http://127.0.0.1:$port$css" | grep -iE "content-encoding|cache-control"
wrk -t2 -c64 -d10s --latency -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port$css" | grep -E "Latency|50%|99%|Requests/sec"

echo "== dataset upload: 2 GiB into both directory stores over loopback, next to two cp's of it"
"$bench" upload --size-mib 2048 --dir "${TMPDIR:-/tmp}"

echo "== GPU telemetry: 1,000 GPUs x 7 days at 10 s (ingest, 7-day node chart, cluster overview, bytes per GPU-day)"
"$bench" telemetry

echo "== wasm bundle: raw, gzip and brotli bytes of the release build"
bash scripts/bundle-size.sh
