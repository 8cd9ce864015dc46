#!/usr/bin/env bash
# Two hotrank binaries side by side on one redis-server: the Redis store's
# ingest (POST /api/events, batches of 1000 fresh views, wrk as in
# redis_ingest.sh), run after run alternating A and B so both see the same
# machine. Each run
# reports events/s and Redis's own CPU per event (INFO cpu, user + sys).
# For a change that should not make anything slower (a restructuring),
# say so with the medians' ratio B/A.
# Usage: bench/redis_ab.sh BIN_A BIN_B   (env: DUR seconds, RUNS)
# Needs redis-server, redis-cli, wrk, curl.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: bench/redis_ab.sh BIN_A BIN_B}
B=${2:?usage: bench/redis_ab.sh BIN_A BIN_B}
DUR=${DUR:-10}
RUNS=${RUNS:-3}
RPORT=${RPORT:-6393}
HPORT=${HPORT:-18093}
TMP=$(mktemp -d)
PIDS=()
. bench/lib.sh
cleanup() {
  bench_stop_all
  bench_redis_stop "$RPORT"
  rm -rf "$TMP"
}
trap cleanup EXIT
bench_redis "$RPORT"
cat > "$TMP/bench.toml" <<TOML
listen = "127.0.0.1:$HPORT"
data_dir = "$TMP/data"
store = "redis"
[gate]
ip_limit_per_minute = 0   # one load generator is one IP
[redis]
url = "redis://127.0.0.1:$RPORT/0"
TOML
rcpu() {
  redis-cli -p "$RPORT" info cpu | tr -d '\r' |
    awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.3f", s}'
}
# One run of binary $1: prints "events_per_s redis_us_per_event".
run() {
  redis-cli -p "$RPORT" flushall >/dev/null
  rm -rf "$TMP/data"
  RUST_LOG=warn "$1" serve --config "$TMP/bench.toml" >>"$TMP/serve.log" 2>&1 & PIDS+=($!)
  until curl -sf "localhost:$HPORT/readyz" >/dev/null; do sleep 0.1; done
  local c0 c1 line ev
  c0=$(rcpu)
  line=$(BATCH=1000 wrk -t1 -c4 -d"${DUR}s" -s bench/wrk/redis_batch.lua "http://127.0.0.1:$HPORT/" | grep RESULT)
  c1=$(rcpu)
  ev=$(sed -E 's/.*events_per_s=([0-9]+).*/\1/' <<<"$line")
  bench_stop_all
  echo "$ev $(awk "BEGIN {printf \"%.2f\", ($c1 - $c0) * 1e6 / ($ev * $DUR)}")"
}
a_ev=(); b_ev=(); a_us=(); b_us=()
for i in $(seq "$RUNS"); do
  echo "run $i/$RUNS, load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  read -r ev us < <(run "$A"); a_ev+=("$ev"); a_us+=("$us")
  echo "  A: $ev events/s, Redis $us us/event" >&2
  read -r ev us < <(run "$B"); b_ev+=("$ev"); b_us+=("$us")
  echo "  B: $ev events/s, Redis $us us/event" >&2
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ea=$(median "${a_ev[@]}"); eb=$(median "${b_ev[@]}")
ua=$(median "${a_us[@]}"); ub=$(median "${b_us[@]}")
echo "median events/s: A $ea, B $eb, B/A $(awk "BEGIN {printf \"%.2f\", $eb/$ea}")"
echo "median Redis us/event: A $ua, B $ub, B/A $(awk "BEGIN {printf \"%.2f\", $ub/$ua}")"
