#!/usr/bin/env bash
# Seed 002's pipeline against the direct Redis store, one redis-server, one
# run (docs/design.md "Pipeline"; BENCHMARKS.md has the figures):
#   seed     seed 000's per-event script in dedupe mode (bench/seed/
#            seed_view.lua driven by bench/seed/seqbench.c, P=16, 50
#            connections), the baseline, on the same Redis;
#   direct   `serve --store redis`: events/s gated and counted through
#            POST /api/events (hotrank bench, batches of 1000);
#   queue    `serve --pipeline --roles api`, no workers: events/s the API
#            appends to the raw streams (answered 202 queued);
#   drain k  then k `hotrank worker filter` + k `hotrank worker count`
#            processes on that backlog: events/s gated and counted, from
#            start until /api/stats says pipeline.backlog = 0, for k = 1, 2;
#   latency  `serve --pipeline` under a background load at half the drain
#            rate of one worker pair: 202 -> pv visible (bench/pipeline_latency.py),
#            p50/p99 (LATENCY=0 skips it; SAMPLES probes, default 200).
# Everything shares this machine's cores (load printed before each run).
# Usage: bench/pipeline_ingest.sh  (env: DUR seconds of load, RUNS,
#   PARTITIONS, STATS=1 for Redis' commandstats of each drain, BIN hotrank binary, default $CARGO_TARGET_DIR or target,
#   release). Needs redis-server, redis-cli, curl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
SEED=${SEED:-bench/seed}
DUR=${DUR:-5}
RUNS=${RUNS:-1}
PARTITIONS=${PARTITIONS:-4}
RPORT=${RPORT:-6393}
HPORT=${HPORT:-18093}
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/hotrank}
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
gcc -O2 -o "$TMP/seqbench" "$SEED/seqbench.c" -lm
[ -x "$BIN" ] || cargo build --release --quiet
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no \
  --daemonize yes --dir "$TMP" --logfile "$TMP/redis.log"
until redis-cli -p "$RPORT" ping >/dev/null 2>&1; do sleep 0.1; done
cat > "$TMP/bench.toml" <<TOML
listen = "127.0.0.1:$HPORT"
data_dir = "$TMP/data"
store = "redis"
[gate]
ip_limit_per_minute = 0   # one load generator is one IP
[limits]
queries_per_minute_per_ip = 100000000   # the latency probe polls
[redis]
url = "redis://127.0.0.1:$RPORT/0"
[pipeline]
partitions = $PARTITIONS
max_backlog = 100000000
batch = 500
TOML
export HOTRANK_CONFIG="$TMP/bench.toml"
stat() { curl -s "localhost:$HPORT/api/stats" | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
serve() { # extra args
  RUST_LOG=warn "$BIN" serve "$@" & PIDS+=($!)
  until curl -sf "localhost:$HPORT/readyz" >/dev/null; do sleep 0.1; done
}
stop_all() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  PIDS=()
}
load() { # label -> events/s
  "$BIN" bench --target "127.0.0.1:$HPORT" --batch 1000 --connections 4 \
    --duration-secs "$DUR" --label "$1" | sed -E 's/.*: ([0-9]+) events\/s.*/\1/'
}
for run in $(seq "$RUNS"); do
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  redis-cli -p "$RPORT" flushall >/dev/null
  SHA=$(redis-cli -p "$RPORT" SCRIPT LOAD "$(cat "$SEED/seed_view.lua")")
  line=$("$TMP/seqbench" -p "$RPORT" -c 50 -P 16 -d "$DUR" -a 10000 -V 1000000000 -m dedupe -s "$SHA" | grep RESULT)
  echo "seed    run $run: $(sed -E 's/.*events_per_s=([0-9]+).*/\1/' <<<"$line") events/s (seed 000 script, dedupe, P=16)"
  redis-cli -p "$RPORT" flushall >/dev/null
  serve
  ev=$(load direct)
  echo "direct  run $run: $ev events/s gated+counted (counted=$(stat "d['counted']"))"
  stop_all
  for k in 1 2; do
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
    redis-cli -p "$RPORT" flushall >/dev/null
    serve --pipeline --roles api
    ev=$(load queue)
    backlog=$(stat "d['pipeline']['backlog']")
    echo "queue   run $run: $ev events/s appended (backlog=$backlog)"
    redis-cli -p "$RPORT" config resetstat >/dev/null
    t0=$(date +%s.%N)
    for i in $(seq "$k"); do
      RUST_LOG=warn "$BIN" worker filter & PIDS+=($!)
      RUST_LOG=warn "$BIN" worker count & PIDS+=($!)
    done
    until [ "$(stat "d['pipeline']['backlog']")" = 0 ]; do sleep 0.05; done
    t1=$(date +%s.%N)
    counted=$(stat "d['counted']")
    quarantined=$(stat "d['quarantinedTotal']")
    rate=$(python3 -c "print(int($backlog/($t1-$t0)))")
    [ "$k" = 1 ] && one=$rate
    echo "drain $k run $run: $backlog events in $(python3 -c "print(f'{$t1-$t0:.2f}')") s = $(python3 -c "print(int($backlog/($t1-$t0)))") events/s gated+counted (counted=$counted quarantined=$quarantined)"
    if [ "${STATS:-0}" = 1 ]; then
      redis-cli -p "$RPORT" info commandstats | tr -d '\r' | grep '^cmdstat' |
        sed -E 's/^cmdstat_([a-z|]+):calls=([0-9]+),usec=([0-9]+),usec_per_call=([0-9.]+).*/  \1 calls=\2 usec=\3 per_call=\4/'
      redis-cli -p "$RPORT" info cpu | tr -d '\r' | grep -E '^used_cpu_(user|sys):'
    fi
    stop_all
  done
  if [ "${LATENCY:-1}" = 1 ]; then
    # End to end at half the drain rate of one worker pair: serve
    # --pipeline (all roles, one worker pair), background load at that
    # rate, a probe measuring 202 -> pv visible in GET /api/articles/{id}.
    echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
    redis-cli -p "$RPORT" flushall >/dev/null
    serve --pipeline
    half=$((one / 2))
    "$BIN" bench --target "127.0.0.1:$HPORT" --batch 100 --connections 2 \
      --duration-secs $((DUR * 4)) --rate "$half" >/dev/null 2>&1 & PIDS+=($!)
    sleep 1
    echo "latency run $run (background load $half events/s): $(python3 bench/pipeline_latency.py "127.0.0.1:$HPORT" "${SAMPLES:-200}")"
    echo "  backlog at the end: $(stat "d['pipeline']['backlog']")"
    stop_all
  fi
done
