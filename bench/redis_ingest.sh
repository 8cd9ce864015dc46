#!/usr/bin/env bash
# Ingest on one redis-server, same run: (a) seed 000's per-event script
# (bench/seed/seed_view.lua) driven by bench/seed/seqbench.c in dedupe
# mode, pipelined 16 deep; (b) hotrank's Redis store ingesting an equivalent
# stream (same articles, visitors and repeat rate) through POST /api/events,
# every event fully gated (eventId-free views: rate limit per visitor,
# dedupe window, counters, hourly and daily buckets, change log).
# Besides events/s, each side reports Redis' own CPU per event (INFO cpu,
# user+sys, over the side's run) and, with STATS=1, INFO commandstats.
# Usage: bench/redis_ingest.sh   (env: DUR seconds, RUNS, SEED dir,
#   BIN hotrank binary, default $CARGO_TARGET_DIR or target, release;
#   LAYOUT=seed runs hotrank with [redis] layout = "seed")
# Needs gcc, redis-server, redis-cli, wrk; builds hotrank --release.
set -euo pipefail
cd "$(dirname "$0")/.."
SEED=${SEED:-bench/seed}
DUR=${DUR:-10}
RUNS=${RUNS:-3}
RPORT=${RPORT:-6391}
HPORT=${HPORT:-18091}
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/hotrank}
STATS=${STATS:-0}
LAYOUT=${LAYOUT:-hotrank}
TMP=$(mktemp -d)
HPID=""
cleanup() {
  [ -n "$HPID" ] && kill "$HPID" 2>/dev/null && wait "$HPID" 2>/dev/null
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
[redis]
url = "redis://127.0.0.1:$RPORT/0"
layout = "$LAYOUT"
TOML
# Redis CPU seconds (user + sys) so far.
rcpu() {
  redis-cli -p "$RPORT" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.3f", s}'
}
# Redis CPU microseconds per event between two rcpu readings.
per_event() { awk "BEGIN {printf \"%.2f\", ($2 - $1) * 1e6 / $3}"; }
cmdstats() {
  [ "$STATS" = 1 ] || return 0
  redis-cli -p "$RPORT" info commandstats | tr -d '\r' | grep '^cmdstat' |
    sed -E 's/^cmdstat_([a-z|]+):calls=([0-9]+),usec=([0-9]+),usec_per_call=([0-9.]+).*/  \1 calls=\2 usec=\3 per_call=\4/'
}
seed=()
ours=()
for run in $(seq "$RUNS"); do
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  redis-cli -p "$RPORT" flushall >/dev/null
  SHA=$(redis-cli -p "$RPORT" SCRIPT LOAD "$(cat "$SEED/seed_view.lua")")
  redis-cli -p "$RPORT" config resetstat >/dev/null
  c0=$(rcpu)
  line=$("$TMP/seqbench" -p "$RPORT" -c 50 -P 16 -d "$DUR" -a 10000 -V 1000000000 -m dedupe -s "$SHA" | grep RESULT)
  c1=$(rcpu)
  ev=$(sed -E 's/.*events_per_s=([0-9]+).*/\1/' <<<"$line")
  echo "seed   run $run: $line redis_us_per_event=$(per_event "$c0" "$c1" $((ev * DUR)))"
  cmdstats
  seed+=("$ev")

  redis-cli -p "$RPORT" flushall >/dev/null
  RUST_LOG=warn "$BIN" serve --config "$TMP/bench.toml" & HPID=$!
  until curl -sf "localhost:$HPORT/readyz" >/dev/null; do sleep 0.1; done
  redis-cli -p "$RPORT" config resetstat >/dev/null
  c0=$(rcpu)
  line=$(BATCH=1000 wrk -t1 -c4 -d"${DUR}s" -s bench/wrk/redis_batch.lua "http://127.0.0.1:$HPORT/" | grep RESULT)
  c1=$(rcpu)
  stats=$(curl -s "localhost:$HPORT/api/stats")
  counted=$(sed -E 's/.*"counted":([0-9]+).*/\1/' <<<"$stats")
  ev=$(sed -E 's/.*events_per_s=([0-9]+).*/\1/' <<<"$line")
  echo "hotrank run $run: $line redis_us_per_event=$(per_event "$c0" "$c1" $((ev * DUR))) counted=$counted"
  cmdstats
  ours+=("$ev")
  kill "$HPID"; wait "$HPID" 2>/dev/null || true; HPID=""
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
S=$(median "${seed[@]}")
O=$(median "${ours[@]}")
echo "median events/s: seed000 script (dedupe, P=16) = $S; hotrank redis store = $O; ratio = $(awk "BEGIN {printf \"%.2f\", $O/$S}")"
