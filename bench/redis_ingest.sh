#!/usr/bin/env bash
# Ingest on one redis-server, same run: (a) seed 000's per-event script
# (shared/bench/seed_view.lua) driven by shared/bench/seqbench.c in dedupe
# mode, pipelined 16 deep; (b) hotrank's Redis store ingesting an equivalent
# stream (same articles, visitors and repeat rate) through POST /api/events,
# every event fully gated (eventId-free views: rate limit per visitor,
# dedupe window, counters, hourly and daily buckets, change log).
# Usage: bench/redis_ingest.sh   (env: DUR seconds, RUNS, SHARED dir)
# Needs gcc, redis-server, redis-cli, wrk; builds hotrank --release.
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${SHARED:-$(cd ../shared 2>/dev/null && pwd || echo /work/shared)}
DUR=${DUR:-10}
RUNS=${RUNS:-3}
RPORT=${RPORT:-6391}
HPORT=${HPORT:-18091}
BIN=target/release/hotrank
TMP=$(mktemp -d)
HPID=""
cleanup() {
  [ -n "$HPID" ] && kill "$HPID" 2>/dev/null && wait "$HPID" 2>/dev/null
  redis-cli -p "$RPORT" shutdown nosave >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
gcc -O2 -o "$TMP/seqbench" "$SHARED/bench/seqbench.c" -lm
[ -x "$BIN" ] && [ "$BIN" -nt src/store/redis/ingest.lua ] || cargo build --release --quiet
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
TOML
seed=()
ours=()
for run in $(seq "$RUNS"); do
  redis-cli -p "$RPORT" flushall >/dev/null
  SHA=$(redis-cli -p "$RPORT" SCRIPT LOAD "$(cat "$SHARED/bench/seed_view.lua")")
  line=$("$TMP/seqbench" -p "$RPORT" -c 50 -P 16 -d "$DUR" -a 10000 -V 1000000000 -m dedupe -s "$SHA" | grep RESULT)
  echo "seed   run $run: $line"
  seed+=("$(sed -E 's/.*events_per_s=([0-9]+).*/\1/' <<<"$line")")

  redis-cli -p "$RPORT" flushall >/dev/null
  RUST_LOG=warn "$BIN" serve --config "$TMP/bench.toml" & HPID=$!
  until curl -sf "localhost:$HPORT/readyz" >/dev/null; do sleep 0.1; done
  line=$(BATCH=1000 wrk -t1 -c4 -d"${DUR}s" -s bench/wrk/redis_batch.lua "http://127.0.0.1:$HPORT/" | grep RESULT)
  echo "hotrank run $run: $line  $(curl -s "localhost:$HPORT/api/stats" | head -c 120)"
  ours+=("$(sed -E 's/.*events_per_s=([0-9]+).*/\1/' <<<"$line")")
  kill "$HPID"; wait "$HPID" 2>/dev/null || true; HPID=""
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
S=$(median "${seed[@]}")
O=$(median "${ours[@]}")
echo "median events/s: seed000 script (dedupe, P=16) = $S; hotrank redis store = $O; ratio = $(awk "BEGIN {printf \"%.2f\", $O/$S}")"
