#!/usr/bin/env bash
# The pipeline's journal (docs/design.md "Disaster recovery"): what it costs
# to queue events with and without `[pipeline] log_url`, and how long a
# disaster recovery takes, one run:
#   plain    `serve --pipeline --roles api`, no workers: events/s appended
#            (hotrank bench, batches of 1000, 4 connections), and CPU per
#            event of the API process and of the main Redis;
#   journal  the same with a journal on a second redis-server: events/s,
#            CPU per event of the API process, the main and the log Redis;
#   position the archive's position script (pipe_position.lua) with the
#            journal run's events all gated and none applied (every one in
#            flight: its worst case), timed with redis-cli;
#   restore  FLUSHALL of the main Redis, then `hotrank archive restore
#            --replay` (empty archive: every journaled event is replayed
#            through the gate and applied): wall time for N events.
# Everything shares this machine's cores (load printed before each run).
# Usage: bench/pipeline_journal.sh  (env: DUR seconds of load, PARTITIONS,
#   BIN hotrank binary [default $CARGO_TARGET_DIR or target, release],
#   PG PostgreSQL URL [postgres://postgres@127.0.0.1:5432/test]). Needs
#   redis-server, redis-cli, curl, python3, psql.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-5}
PARTITIONS=${PARTITIONS:-4}
RPORT=${RPORT:-6394}
LPORT=${LPORT:-6395}
HPORT=${HPORT:-18094}
PG=${PG:-postgres://postgres@127.0.0.1:5432/test}
SCHEMA="bench_journal_$$"
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/hotrank}
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
[gate]
ip_limit_per_minute = 0   # one load generator is one IP
[redis]
url = "redis://127.0.0.1:$RPORT/0"
[pipeline]
partitions = $PARTITIONS
max_backlog = 100000000
batch = 500
[archive]
url = "$PG"
schema = "$SCHEMA"
flush_secs = 0
TOML
export HOTRANK_CONFIG="$TMP/bench.toml"
stat() { curl -s "localhost:$HPORT/api/stats" | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# CPU seconds (user + system) of a process, and of a redis-server.
cpu_pid() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
cpu_redis() {
  redis-cli -p "$1" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {print s}'
}
us_per() { python3 -c "print(f'{($2 - $1) * 1e6 / $3:.2f}')"; }
for mode in plain journal; do
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  redis-cli -p "$RPORT" flushall >/dev/null
  redis-cli -p "$LPORT" flushall >/dev/null
  args=(--pipeline --roles api)
  [ "$mode" = journal ] && args+=(--pipeline-log-url "redis://127.0.0.1:$LPORT/0")
  RUST_LOG=warn "$BIN" serve "${args[@]}" & api=$!
  PIDS+=($api)
  until curl -sf "localhost:$HPORT/readyz" >/dev/null; do sleep 0.1; done
  a0=$(cpu_pid "$api"); r0=$(cpu_redis "$RPORT"); l0=$(cpu_redis "$LPORT")
  ev=$("$BIN" bench --target "127.0.0.1:$HPORT" --batch 1000 --connections 4 \
    --duration-secs "$DUR" --label "$mode" | sed -E 's/.*: ([0-9]+) events\/s.*/\1/')
  a1=$(cpu_pid "$api"); r1=$(cpu_redis "$RPORT"); l1=$(cpu_redis "$LPORT")
  n=$(stat "d['pipeline']['backlog']")
  line="$mode: $ev events/s appended ($n queued); CPU per event: API $(us_per "$a0" "$a1" "$n") us, main Redis $(us_per "$r0" "$r1" "$n") us"
  [ "$mode" = journal ] && line="$line, log Redis $(us_per "$l0" "$l1" "$n") us"
  echo "$line"
  bench_stop_all
done
# The position script at its worst: every entry gated, none applied.
RUST_LOG=warn "$BIN" worker filter & PIDS+=($!)
flagged() {
  local t=0
  for p in $(seq 0 $((PARTITIONS - 1))); do
    t=$((t + $(redis-cli -p "$RPORT" xlen "pipe:flagged:$p")))
  done
  echo "$t"
}
until [ "$(flagged)" -ge "$n" ]; do sleep 0.2; done
bench_stop_all
cat src/store/redis/declared.lua src/store/redis/pipe_ids.lua \
  src/store/redis/pipe_position.lua > "$TMP/position.lua"
keys=()
for p in $(seq 0 $((PARTITIONS - 1))); do keys+=("pipe:raw:$p" "pipe:flagged:$p"); done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s.%N)
redis-cli -p "$RPORT" --eval "$TMP/position.lua" , 1000000000 "$PARTITIONS" "${keys[@]}" >/dev/null
t1=$(date +%s.%N)
echo "position: $n entries in flight: $(python3 -c "print(f'{($t1-$t0)*1000:.0f}')") ms (one call, Redis blocked meanwhile; the writer refuses past $(grep -o 'MAX_FLIGHT: u64 = [0-9_]*' src/store/redis/position.rs | grep -o '[0-9_]*$'))"
# The journal run's events: lost with the main Redis, replayed from the journal.
journaled=0
for p in $(seq 0 $((PARTITIONS - 1))); do
  journaled=$((journaled + $(redis-cli -p "$LPORT" xlen "pipe:journal:$p")))
done
redis-cli -p "$RPORT" flushall >/dev/null
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(date +%s.%N)
RUST_LOG=warn "$BIN" archive restore --replay --pipeline-log-url "redis://127.0.0.1:$LPORT/0" 2>"$TMP/restore.log"
t1=$(date +%s.%N)
tail -1 "$TMP/restore.log"
echo "restore: $journaled journal entries replayed in $(python3 -c "print(f'{$t1-$t0:.2f}')") s = $(python3 -c "print(int($journaled/($t1-$t0)))") entries/s"
