#!/usr/bin/env bash
# What journaling article operations costs (docs/design.md, "Disaster
# recovery", "Article operations"), one run on this machine:
#   plain    `serve --pipeline --roles api` without a journal: votes/s
#            (wrk, 2 threads, 16 connections, every vote counted), script
#            calls (EVALSHA: round trips) and commands (with those scripts
#            run, INFO commandstats) per vote, and CPU per vote of the API
#            process and the main Redis;
#   journal  the same with `--pipeline-log-url` (a second redis-server):
#            votes/s, calls per vote on each Redis, CPU per vote;
#   replay   FLUSHALL of the main Redis, then `hotrank archive restore
#            --replay` (empty archive: every journaled vote runs again):
#            wall time and votes/s.
# Everything shares this machine's cores (load printed before each run).
# Usage: bench/votes_journal.sh  (env: DUR seconds of load, ARTICLES,
#   BIN hotrank binary [default $CARGO_TARGET_DIR or target, release],
#   PG PostgreSQL URL [postgres://postgres@127.0.0.1:5432/test]). Needs
#   redis-server, redis-cli, curl, wrk, python3, psql.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-5}
export ARTICLES=${ARTICLES:-200}
RPORT=${RPORT:-6396}
LPORT=${LPORT:-6397}
HPORT=${HPORT:-18096}
PG=${PG:-postgres://postgres@127.0.0.1:5432/test}
SCHEMA="bench_votes_$$"
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/hotrank}
export ADMIN="bench-admin-token"
TMP=$(mktemp -d)
PIDS=()
. bench/lib.sh
cleanup() {
  bench_stop_all
  bench_redis_stop "$RPORT" "$LPORT"
  psql -q "$PG" -c "DROP SCHEMA IF EXISTS $SCHEMA CASCADE" >/dev/null 2>&1 || true
  rm -rf "$TMP"
}
trap cleanup EXIT
[ -x "$BIN" ] || cargo build --release --quiet
bench_redis "$RPORT"
bench_redis "$LPORT"
cat > "$TMP/bench.toml" <<TOML
listen = "127.0.0.1:$HPORT"
data_dir = "$TMP/data"
store = "redis"
admin_token = "$ADMIN"
[redis]
url = "redis://127.0.0.1:$RPORT/0"
[pipeline]
partitions = 4
[archive]
url = "$PG"
schema = "$SCHEMA"
flush_secs = 0
TOML
export HOTRANK_CONFIG="$TMP/bench.toml"
cpu_pid() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
cpu_redis() {
  redis-cli -p "$1" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {print s}'
}
# Command calls a Redis served so far (INFO commandstats; those scripts
# run count too): every command, or those named $2 (a regex).
calls() {
  redis-cli -p "$1" info commandstats | tr -d '\r' |
    awk -F'calls=' -v m="^cmdstat_(${2:-.*}):" '$0 ~ m {split($2, a, ","); s += a[1]} END {print s + 0}'
}
per() { python3 -c "print(f'{($2 - $1) / $3:.2f}')"; }
us_per() { python3 -c "print(f'{($2 - $1) * 1e6 / $3:.1f}')"; }
votes() {
  redis-cli -p "$RPORT" eval "local s = 0 for i = 0, $ARTICLES - 1 do s = s + tonumber(redis.call('HGET', 'counter:article:v' .. i, 'ups') or '0') end return s" 0
}
for mode in plain journal; do
  redis-cli -p "$RPORT" flushall >/dev/null
  redis-cli -p "$LPORT" flushall >/dev/null
  args=(--pipeline --roles api)
  [ "$mode" = journal ] && args+=(--pipeline-log-url "redis://127.0.0.1:$LPORT/0")
  RUST_LOG=error "$BIN" serve "${args[@]}" & api=$!
  PIDS+=($api)
  until curl -sf "localhost:$HPORT/readyz" >/dev/null; do sleep 0.1; done
  for k in $(seq 0 $((ARTICLES - 1))); do
    curl -sf -X PUT -H "Authorization: Bearer $ADMIN" -H 'Content-Type: application/json' \
      -d "{\"title\":\"v$k\",\"publishedAt\":$(date +%s)}" "localhost:$HPORT/api/articles/v$k" >/dev/null
  done
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  a0=$(cpu_pid "$api"); r0=$(cpu_redis "$RPORT"); l0=$(cpu_redis "$LPORT")
  c0=$(calls "$RPORT"); d0=$(calls "$LPORT")
  e0=$(calls "$RPORT" 'evalsha|eval'); f0=$(calls "$LPORT" 'evalsha|eval')
  wrk -t2 -c16 -d"${DUR}s" -s bench/wrk/votes.lua "http://127.0.0.1:$HPORT" > "$TMP/wrk.txt"
  rps=$(awk '/Requests\/sec/ {print int($2)}' "$TMP/wrk.txt")
  bad=$(awk '/Non-2xx/ {print $NF}' "$TMP/wrk.txt")
  a1=$(cpu_pid "$api"); r1=$(cpu_redis "$RPORT"); l1=$(cpu_redis "$LPORT")
  c1=$(calls "$RPORT"); d1=$(calls "$LPORT")
  e1=$(calls "$RPORT" 'evalsha|eval'); f1=$(calls "$LPORT" 'evalsha|eval')
  n=$(votes)
  line="$mode: $rps votes/s (${bad:-0} not 2xx; $n counted); per vote: main Redis $(per "$e0" "$e1" "$n") scripts, $(per "$c0" "$c1" "$n") commands"
  [ "$mode" = journal ] && line="$line; log Redis $(per "$f0" "$f1" "$n") scripts, $(per "$d0" "$d1" "$n") commands"
  line="$line; CPU per vote: API $(us_per "$a0" "$a1" "$n") us, main Redis $(us_per "$r0" "$r1" "$n") us"
  [ "$mode" = journal ] && line="$line, log Redis $(us_per "$l0" "$l1" "$n") us"
  echo "$line"
  bench_stop_all
done
# The journal run's votes: lost with the main Redis, run again from the journal.
ops=$(redis-cli -p "$LPORT" xlen pipe:journal:ops)
redis-cli -p "$RPORT" flushall >/dev/null
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s.%N)
RUST_LOG=warn "$BIN" archive restore --replay --pipeline-log-url "redis://127.0.0.1:$LPORT/0" 2>"$TMP/restore.log"
t1=$(date +%s.%N)
grep -h "article operations" "$TMP/restore.log" | tail -2
echo "replay: $ops journaled operations ($n votes, $ARTICLES PUTs) in $(python3 -c "print(f'{$t1-$t0:.2f}')") s = $(python3 -c "print(int($ops/($t1-$t0)))") operations/s; votes after: $(votes)"
