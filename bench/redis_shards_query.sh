#!/usr/bin/env bash
# GET /api/hot?range=72h&limit=20 on the Redis store with [redis] shards =
# 1 and then 4 (issue 13: the scatter-gather threshold walk), one
# redis-server each (started here, no persistence); with CLUSTER=1 shards
# = 1 and then 3 on a 3-primary Redis Cluster each (started here, no
# replicas: with 3 shards the site's shards are on 3 primaries, its own
# slot on one of them), ARTICLES live articles
# (one preload view each, then views by a Zipf stream), back to back.
# Each run: preload, a first query (the ranking's rebuild, or the
# catch-up of a ranking the node kept up to date meanwhile), then
# queries alone, then queries while UPDATES events/s arrive (the
# change log makes the walk re-score those articles); then the node is
# restarted with every ranking deleted (as after an import, or rankings
# nobody asked for in an hour and a half): how long until /readyz says
# ready (the node
# rebuilds the default ranking first) and the first query after that.
# Usage: bench/redis_shards_query.sh   (env: ARTICLES, DUR seconds,
#   UPDATES events/s, SHARDS list, CLUSTER=1, BIN hotrank binary; default release
#   build of this checkout under $CARGO_TARGET_DIR or target;
#   TIMEOUT_MS the nodes' Redis response timeout, default 2000 as
#   hotrank's: builds before 1f4b097 need 60000 for the first query)
# Needs redis-server, redis-cli, curl, python3. Not part of CI.
set -euo pipefail
cd "$(dirname "$0")/.."
ARTICLES=${ARTICLES:-100000}
DUR=${DUR:-10}
UPDATES=${UPDATES:-2000}
CLUSTER=${CLUSTER:-0}
if [ "$CLUSTER" = 1 ]; then SHARDS=${SHARDS:-1 3}; else SHARDS=${SHARDS:-1 4}; fi
TIMEOUT_MS=${TIMEOUT_MS:-2000}
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/hotrank}
[ -x "$BIN" ] || cargo build --release --quiet --bin hotrank
TMP=$(mktemp -d)
PIDS=()
. bench/lib.sh
RPORTS=()
cleanup() {
  bench_stop_all
  bench_redis_stop "${RPORTS[@]:-}"
  rm -rf "$TMP"
}
trap cleanup EXIT
field() { python3 -c "import json,sys; print(json.load(open('$1'))['$2'])"; }
bench() { "$BIN" bench "$@" 2>/dev/null; }

WHERE="one redis-server"
[ "$CLUSTER" = 1 ] && WHERE="a 3-primary Redis Cluster"
echo "# /api/hot top 20 on the Redis store by article shards, on $WHERE — $(date -u +%Y-%m-%dT%H:%MZ), $(git rev-parse --short HEAD), $(nproc) cores, $(redis-server --version | cut -d' ' -f3)"
echo "# $ARTICLES articles, $DUR s per measurement, updates $UPDATES events/s; load before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf '| shards | first query, ms | queries alone: q/s, p50, p99 (µs) | with %s updates/s: q/s, p50, p99 (µs) | updates sent/s, errors | restart without rankings: ready after, first query (ms) | load avg |\n|---|---|---|---|---|---|---|\n' "$UPDATES"
for N in $SHARDS; do
  if [ "$CLUSTER" = 1 ]; then
    NODES=("$(free_port)" "$(free_port)" "$(free_port)"); RPORTS+=("${NODES[@]}")
    bench_cluster "${NODES[@]}"
    URL=$(for p in "${NODES[@]}"; do printf 'redis://127.0.0.1:%s,' "$p"; done)
    URL=${URL%,}
    CLUSTER_TOML="cluster = true"
  else
    NODES=("$(free_port)"); RPORTS+=("${NODES[@]}")
    bench_redis "${NODES[0]}"
    URL="redis://127.0.0.1:${NODES[0]}/0"
    CLUSTER_TOML=""
  fi
  HP=$(free_port)
  mkdir -p "$TMP/h$N"
  cat > "$TMP/h$N/hotrank.toml" <<TOML
listen = "127.0.0.1:$HP"
data_dir = "$TMP/h$N/data"
store = "redis"
ingest_token = "bench-ingest-token"
[redis]
url = "$URL"
$CLUSTER_TOML
shards = $N
response_timeout_ms = $TIMEOUT_MS
[gate]
ip_limit_per_minute = 0
[limits]
queries_per_minute_per_ip = 0
TOML
  start_node() {
    RUST_LOG=warn "$BIN" serve --config "$TMP/h$N/hotrank.toml" >> "$TMP/h$N/log" 2>&1 &
    HPID=$!; PIDS+=($HPID)
    until curl -sf "127.0.0.1:$HP/healthz" >/dev/null; do sleep 0.05; done
  }
  start_node
  bench --target "127.0.0.1:$HP" --preload --articles "$ARTICLES" --batch 1000 --connections 4 \
    --duration-secs 600 --token bench-ingest-token --label preload >/dev/null
  FIRST=$(curl -s -o /dev/null -w '%{http_code} %{time_total}' --max-time 300 "127.0.0.1:$HP/api/hot?range=72h&limit=20")
  FIRST=$(python3 -c "c, t = '$FIRST'.split(); print(f'{float(t) * 1000:.0f}' + ('' if c == '200' else f' (HTTP {c})'))")
  bench --target "127.0.0.1:$HP" --query "/api/hot?range=72h&limit=20" --connections 1 \
    --duration-secs "$DUR" --json "$TMP/q$N.json" --label "alone $N"
  bench --target "127.0.0.1:$HP" --articles "$ARTICLES" --zipf 1.0 --visitors 10000000 --batch 100 \
    --connections 2 --rate "$UPDATES" --duration-secs $((DUR + 2)) --token bench-ingest-token \
    --json "$TMP/w$N.json" --label updates >/dev/null &
  UP=$!
  sleep 1
  bench --target "127.0.0.1:$HP" --query "/api/hot?range=72h&limit=20" --connections 1 \
    --duration-secs "$DUR" --json "$TMP/u$N.json" --label "updates $N"
  wait "$UP" || true  # (its exit status: whether every update was accepted)
  kill "$HPID"; wait "$HPID" 2>/dev/null || true
  for p in "${NODES[@]}"; do
    redis-cli -p "$p" --scan --pattern '*hot:*' | while read -r k; do
      redis-cli -c -p "$p" del "$k" >/dev/null
    done
  done
  t0=$(date +%s.%N)
  start_node
  until curl -sf "127.0.0.1:$HP/readyz" >/dev/null; do sleep 0.05; done
  READY=$(python3 -c "import time; print(f'{(time.time() - $t0) * 1000:.0f}')")
  AFTER=$(curl -s -o /dev/null -w '%{time_total}' --max-time 300 "127.0.0.1:$HP/api/hot?range=72h&limit=20")
  AFTER=$(python3 -c "print(f'{float(\"$AFTER\") * 1000:.1f}')")
  printf '| %s | %s | %.0f, %s, %s | %.0f, %s, %s | %.0f, %s | %s, %s | %s |\n' "$N" "$FIRST" \
    "$(field "$TMP/q$N.json" requests_per_sec)" "$(field "$TMP/q$N.json" p50_us)" "$(field "$TMP/q$N.json" p99_us)" \
    "$(field "$TMP/u$N.json" requests_per_sec)" "$(field "$TMP/u$N.json" p50_us)" "$(field "$TMP/u$N.json" p99_us)" \
    "$(field "$TMP/w$N.json" events_per_sec)" "$(field "$TMP/w$N.json" errors)" \
    "$READY" "$AFTER" "$(cut -d' ' -f1-3 /proc/loadavg)"
  bench_stop_all
  bench_redis_stop "${NODES[@]}"
done
