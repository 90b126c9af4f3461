#!/usr/bin/env bash
# Prints Gantry's performance figures (nothing here is a test):
#  1. admissions/s through the real admission path on a simulated 1,000-node x 8-GPU cluster;
#  2. 20 dev machines created at once on the local Docker Engine vs raw Engine API calls;
#  3. the browser terminal: keystroke echo through Gantry next to `docker exec -it`, memory per open terminal;
#  4. compute-task matching decisions and a matcher pass over 10,000 queued tasks;
#  5. the signed-in dashboard and a static CSS file under wrk load from a second process.
# Needs the release build (`make build`); uses only 127.0.0.1 and the Docker socket.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/gantry
[ -x "$bin" ] || { echo "run 'make build' first" >&2; exit 1; }

echo "== 1. admissions"
"$bin" bench admissions --nodes 1000 --gpus-per-node 8 --requests 8000

echo "== 2. dev machines on Docker"
if bash scripts/dockerd.sh >/dev/null && bash scripts/demo-image.sh >/dev/null; then
  "$bin" bench docker --machines 20
  GANTRY_LOOP_VOLUMES=0 "$bin" bench docker --machines 20
else
  echo "no Docker Engine: skipped"
fi

echo "== 3. browser terminal: keystroke echo next to docker exec -it, memory per open terminal"
if bash scripts/dockerd.sh >/dev/null && bash scripts/demo-image.sh >/dev/null; then
  "$bin" bench terminal --keystrokes 1000 --terminals 50
else
  echo "no Docker Engine: skipped"
fi

echo "== 4. compute-task matching: decisions on 100 regions x 100 nodes x 8 GPUs, a queue pass over 10,000 tasks"
"$bin" bench matching

echo "== 5. HTTP under load (wrk -t2 -c64 -d10s)"
data=$(mktemp -d)
port=3411
GANTRY_DATA_DIR=$data GANTRY_LISTEN=127.0.0.1:$port GANTRY_ADMIN_PASSWORD=bench-password-1 \
  GANTRY_EXECUTOR=simulated RUST_LOG=warn "$bin" serve >"$data/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$data"' EXIT
for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break; sleep 0.1; done
cookie=$(curl -s -o /dev/null -D - -H "Origin: http://127.0.0.1:$port" \
  --data 'username=admin&password=bench-password-1' "http://127.0.0.1:$port/api/login" \
  | sed -n 's/^set-cookie: \(gantry_session=[^;]*\).*/\1/ip')
css=$(ls target/site/pkg/*.css | head -n1 | sed 's|target/site||')
echo "-- signed-in dashboard (/)"
wrk -t2 -c64 -d10s --latency -H "Cookie: $cookie" "http://127.0.0.1:$port/" | grep -E "Latency|50%|99%|Requests/sec|Non-2xx"
echo "-- static $css (gzip)"
curl -s -o /dev/null -D - -H 'Accept-Encoding: gzip, br' "http://127.0.0.1:$port$css" | grep -iE "content-encoding|cache-control"
wrk -t2 -c64 -d10s --latency -H 'Accept-Encoding: gzip' "http://127.0.0.1:$port$css" | grep -E "Latency|50%|99%|Requests/sec"
