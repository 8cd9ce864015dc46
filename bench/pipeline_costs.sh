#!/usr/bin/env bash
# Redis instructions per event of seed 002's pipeline, stage by stage,
# beside seed 000's script with its dedupe step and the direct Redis store,
# on one stream (the load generator's, the same seed for every path):
#   seed     `hotrank bench --seed-redis --seed-dedupe`: per event
#            `SET dedup:V:A 1 NX EX 900`, then seed_view.lua for new pairs;
#   direct   `serve --store redis`, POST /api/events batches of 250;
#   append   `serve --pipeline --roles api`: what the API's appends cost
#            Redis (the raw streams);
#   filter   then one `hotrank worker filter` over that backlog;
#   count    then one `hotrank worker count` over the flagged entries.
# redis-server runs under valgrind's callgrind, so the figures are
# instructions, not seconds: they do not depend on what else the machine
# is doing. Each path first runs a warm-up pass (articles, buckets and
# consumer groups exist: the steady state), then the measured pass with
# fresh visitors; the counters are zeroed before and dumped after each
# measured stage (callgrind_control). The issue's goal for the pipeline:
# filter + count <= half the seed's instructions per event.
# The stream: EVENTS views (default 20,000) of distinct visitors over
# ARTICLES articles (10,000, uniform), trusted (token), no bots, no
# repeats, no floods, sent at RATE events/s (the Redis under callgrind
# runs ~50x slower than without).
# Usage: bench/pipeline_costs.sh   (env: EVENTS, ARTICLES, RATE, BATCH
#   (the pipeline's worker batch, 500), PARTITIONS (4), BIN (the hotrank
#   binary; default target/release/hotrank), KEEP=DIR keeps the dumps).
# Needs redis-server, valgrind (callgrind_control, callgrind_annotate),
# curl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
EVENTS=${EVENTS:-20000}
ARTICLES=${ARTICLES:-10000}
RATE=${RATE:-2000}
BATCH=${BATCH:-500}
PARTITIONS=${PARTITIONS:-4}
BIN=$(realpath "${BIN:-${CARGO_TARGET_DIR:-target}/release/hotrank}")
TMP=${KEEP:-$(mktemp -d)}
mkdir -p "$TMP"
PIDS=()
RPID=
. bench/lib.sh
RPORT=$(free_port)
HPORT=$(free_port)
cleanup() {
  bench_stop_all
  pkill -f "$BIN worker" 2>/dev/null || true
  redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1 || true
  [ -n "$RPID" ] && wait "$RPID" 2>/dev/null || true
  [ -z "${KEEP:-}" ] && rm -rf "$TMP"
  true
}
trap cleanup EXIT
[ -x "$BIN" ] || { echo "no hotrank binary at $BIN (cargo build --release)" >&2; exit 1; }

valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.out" \
  redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no \
  --dir "$TMP" >"$TMP/redis.log" 2>&1 &
RPID=$!
until redis-cli -p "$RPORT" ping >/dev/null 2>&1; do
  kill -0 "$RPID" 2>/dev/null || { tail -5 "$TMP/redis.log"; exit 1; }
  sleep 0.2
done

cat >"$TMP/bench.toml" <<TOML
listen = "127.0.0.1:$HPORT"
data_dir = "$TMP/data"
store = "redis"
[gate]
ip_limit_per_minute = 0
visitor_limit_per_minute = 0
[limits]
queries_per_minute_per_ip = 100000000
[redis]
url = "redis://127.0.0.1:$RPORT/0"
response_timeout_ms = 600000   # redis-server runs under callgrind
[pipeline]
partitions = $PARTITIONS
max_backlog = 100000000
batch = $BATCH
TOML
export HOTRANK_CONFIG="$TMP/bench.toml"
export HOTRANK_INGEST_TOKEN=bench-ingest-token

stats() { curl -sf "127.0.0.1:$HPORT/api/stats" | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
serve() {
  RUST_LOG=warn "$BIN" serve "$@" & PIDS+=($!)
  until curl -sf "127.0.0.1:$HPORT/readyz" >/dev/null; do sleep 0.2; done
}
# The stream: seed S (1 warms up, 2 is measured), EVENTS events at RATE.
stream() { # seed json [extra bench arguments...]
  local seed=$1 json=$2
  shift 2
  "$BIN" bench "$@" --seed "$seed" --articles "$ARTICLES" --zipf 0 --visitors 1000000000 \
    --repeat-rate 0 --bot-share 0 --flood-share 0 --rate "$RATE" \
    --duration-secs "$(( (EVENTS + RATE - 1) / RATE ))" --json "$json" >/dev/null 2>&1
}
post() { stream "$1" "$2" --target "127.0.0.1:$HPORT" --batch 250 --connections 2 --token "$HOTRANK_INGEST_TOKEN"; }
zero() { callgrind_control -z "$RPID" >/dev/null; }
# Dumps the counters since the last zero and prints the instructions.
dump() {
  callgrind_control -d "$RPID" >/dev/null
  local f
  f=$(ls "$TMP"/cg.out.* | sort -t. -k3 -n | tail -1)
  callgrind_annotate "$f" 2>/dev/null | grep -m1 'PROGRAM TOTALS' | awk '{gsub(",","",$1); print $1}'
}
per() { python3 -c "print(f'{$1 / max($2, 1) / 1000:.1f}')"; }

echo "redis-server under callgrind; $EVENTS events over $ARTICLES articles at $RATE/s; load $(cut -d' ' -f1-3 /proc/loadavg); $(basename "$BIN") $(git rev-parse --short HEAD 2>/dev/null)"

# seed 000's script with its dedupe step
redis-cli -p "$RPORT" flushall >/dev/null
stream 1 "$TMP/seed-warm.json" --seed-redis "127.0.0.1:$RPORT" --seed-script bench/seed/seed_view.lua --seed-dedupe --connections 8
zero
stream 2 "$TMP/seed.json" --seed-redis "127.0.0.1:$RPORT" --seed-script bench/seed/seed_view.lua --seed-dedupe --connections 8
SEED_IR=$(dump)
SEED_N=$(python3 -c "import json; print(json.load(open('$TMP/seed.json'))['events'])")
echo "seed    $SEED_N events: $(per "$SEED_IR" "$SEED_N") kinstr/event"

# the direct Redis store
redis-cli -p "$RPORT" flushall >/dev/null
serve
post 1 "$TMP/direct-warm.json"
c0=$(stats "d['counted']")
zero
post 2 "$TMP/direct.json"
DIRECT_IR=$(dump)
DIRECT_N=$(( $(stats "d['counted']") - c0 ))
echo "direct  $DIRECT_N events counted: $(per "$DIRECT_IR" "$DIRECT_N") kinstr/event ($(python3 -c "print(f'{$DIRECT_IR / $DIRECT_N / ($SEED_IR / $SEED_N):.2f}')")x the seed's)"
bench_stop_all

# the pipeline: warm-up through both stages, then each stage measured
# alone, with nothing else talking to Redis (the API node is stopped
# after its appends; the lag is read with XINFO GROUPS)
lag() { # group -> pending + unread over every partition (-1: unknown)
  local stream=raw n
  [ "$1" = count ] && stream=flagged
  for n in $(seq 0 $((PARTITIONS - 1))); do
    redis-cli -p "$RPORT" xinfo groups "pipe:$stream:$n"
  done | python3 -c "
import sys
lines = sys.stdin.read().split('\n')
total = 0
for k in range(0, len(lines) - 1, 12):
    g = dict(zip(lines[k:k + 12:2], lines[k + 1:k + 12:2]))
    if not g.get('lag', '').isdigit():
        total = -1
        break
    total += int(g['pending']) + int(g['lag'])
print(total)"
}
drain() { # role...: runs one worker of each role until both lags are 0
  local r
  for r in "$@"; do RUST_LOG=warn "$BIN" worker "$r" & done
  for r in "$@"; do until [ "$(lag "$r")" = 0 ]; do sleep 1; done; done
}
stop_workers() { pkill -f "$BIN worker" 2>/dev/null || true; sleep 0.5; }
redis-cli -p "$RPORT" flushall >/dev/null
serve --pipeline --roles api
post 1 "$TMP/pipe-warm.json"
bench_stop_all
drain filter count
stop_workers
serve --pipeline --roles api
zero
post 2 "$TMP/pipe.json"
APPEND_IR=$(dump)
bench_stop_all
N=$(lag filter)
echo "append  $N events queued: $(per "$APPEND_IR" "$N") kinstr/event"
zero
drain filter
FILTER_IR=$(dump)
stop_workers
echo "filter  $N events gated: $(per "$FILTER_IR" "$N") kinstr/event"
zero
drain count
COUNT_IR=$(dump)
stop_workers
echo "count   $N events applied: $(per "$COUNT_IR" "$N") kinstr/event"
python3 - "$SEED_IR" "$SEED_N" "$FILTER_IR" "$COUNT_IR" "$APPEND_IR" "$N" <<'PY'
import sys
seed_ir, seed_n, f, c, a, n = map(int, sys.argv[1:])
seed = seed_ir / seed_n
stages = (f + c) / n
print(f"| path | Redis kinstr/event | ratio to the seed's |")
print(f"|---|---|---|")
print(f"| seed 000 script + dedupe | {seed / 1000:.1f} | 1.00x |")
print(f"| pipeline filter + count | {stages / 1000:.1f} | {stages / seed:.2f}x (goal <= 0.50x: drain >= 2x the seed) |")
print(f"| pipeline with its appends | {(a + f + c) / n / 1000:.1f} | {(a + f + c) / n / seed:.2f}x |")
PY
