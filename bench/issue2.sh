#!/usr/bin/env bash
# Issue 2's figures with wrk: ingest through POST /api/events (batches of
# 1000) and single POST /api/views, and GET /api/hot latency with 100,000
# articles. Usage: bench/issue2.sh [fsync: always|interval] (needs wrk).
set -euo pipefail
cd "$(dirname "$0")/.."
FSYNC=${1:-always}
PORT=${PORT:-18080}
DUR=${DUR:-10s}
BIN=${CARGO_TARGET_DIR:-target}/release/hotrank
[ -x "$BIN" ] || cargo build --release
DIR=$(mktemp -d)
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null; rm -rf "$DIR"' EXIT
cat > "$DIR/bench.toml" <<TOML
listen = "127.0.0.1:$PORT"
data_dir = "$DIR/data"
[gate]
ip_limit_per_minute = 0   # one load generator is one IP
[embedded]
fsync = "$FSYNC"
TOML
RUST_LOG=warn "$BIN" serve --config "$DIR/bench.toml" & PID=$!
until curl -sf "localhost:$PORT/healthz" >/dev/null; do sleep 0.1; done
echo "== fsync=$FSYNC; batches of 1000 (also loads 100,000 articles)"
BATCH=1000 wrk -t2 -c8 -d"$DUR" -s bench/wrk/batch.lua "http://127.0.0.1:$PORT/" | grep -E "events/s|Requests/sec|Latency"
echo "== single POST /api/views"
wrk -t2 -c32 -d"$DUR" -s bench/wrk/views.lua "http://127.0.0.1:$PORT/" | grep -E "Requests/sec|Latency"
curl -s "localhost:$PORT/api/stats" | head -c 300; echo
echo "== GET /api/hot?range=72h&limit=20, 100,000 articles with near-equal scores, 1 and 8 connections"
for c in 1 8; do
  wrk -t1 -c$c -d"$DUR" -s bench/wrk/pct.lua "http://127.0.0.1:$PORT/api/hot?range=72h&limit=20" | grep p50_us
done
echo "== the same after a skewed load (SKEW=3: a few articles get most views)"
BATCH=1000 SKEW=3 wrk -t2 -c8 -d"$DUR" -s bench/wrk/batch.lua "http://127.0.0.1:$PORT/" | grep -E "events/s"
for c in 1 8; do
  wrk -t1 -c$c -d"$DUR" -s bench/wrk/pct.lua "http://127.0.0.1:$PORT/api/hot?range=72h&limit=20" | grep p50_us
done
