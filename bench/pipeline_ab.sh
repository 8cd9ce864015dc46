#!/usr/bin/env bash
# Two hotrank binaries side by side on one redis-server, the ingest
# pipeline (seed 002): the API node's appends (POST /api/events, batches of
# 1000, `hotrank bench`) and the drain of that backlog by one filter and
# one count worker, run after run alternating A and B so both see the same
# machine. For a change that should not make anything slower (a
# restructuring), say so with the medians' ratio B/A.
# Usage: bench/pipeline_ab.sh BIN_A BIN_B   (env: DUR seconds of load, RUNS,
#   PARTITIONS). Needs redis-server, redis-cli, curl, python3.
set -euo pipefail
cd "$(dirname "$0")/.."
A=${1:?usage: bench/pipeline_ab.sh BIN_A BIN_B}
B=${2:?usage: bench/pipeline_ab.sh BIN_A BIN_B}
DUR=${DUR:-5}
RUNS=${RUNS:-3}
PARTITIONS=${PARTITIONS:-4}
RPORT=${RPORT:-6394}
HPORT=${HPORT:-18094}
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
[pipeline]
partitions = $PARTITIONS
max_backlog = 100000000
batch = 500
TOML
export HOTRANK_CONFIG="$TMP/bench.toml"
stat() { curl -s "localhost:$HPORT/api/stats" | python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
# One run of binary $1: prints "appended_events_per_s drained_events_per_s".
run() {
  local bin=$1 ev backlog t0 t1
  redis-cli -p "$RPORT" flushall >/dev/null
  rm -rf "$TMP/data"
  RUST_LOG=warn "$bin" serve --pipeline --roles api >>"$TMP/serve.log" 2>&1 & PIDS+=($!)
  until curl -sf "localhost:$HPORT/readyz" >/dev/null; do sleep 0.1; done
  ev=$("$bin" bench --target "127.0.0.1:$HPORT" --batch 1000 --connections 4 \
    --duration-secs "$DUR" --label queue 2>/dev/null | sed -E 's/.*: ([0-9]+) events\/s.*/\1/')
  backlog=$(stat "d['pipeline']['backlog']")
  t0=$(date +%s.%N)
  RUST_LOG=warn "$bin" worker filter >>"$TMP/serve.log" 2>&1 & PIDS+=($!)
  RUST_LOG=warn "$bin" worker count >>"$TMP/serve.log" 2>&1 & PIDS+=($!)
  until [ "$(stat "d['pipeline']['backlog']")" = 0 ]; do sleep 0.05; done
  t1=$(date +%s.%N)
  bench_stop_all
  echo "$ev $(python3 -c "print(int($backlog/($t1-$t0)))")"
}
a_in=(); b_in=(); a_out=(); b_out=()
for i in $(seq "$RUNS"); do
  echo "run $i/$RUNS, load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  read -r in out < <(run "$A"); a_in+=("$in"); a_out+=("$out")
  echo "  A: appended $in events/s, drained $out events/s" >&2
  read -r in out < <(run "$B"); b_in+=("$in"); b_out+=("$out")
  echo "  B: appended $in events/s, drained $out events/s" >&2
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ia=$(median "${a_in[@]}"); ib=$(median "${b_in[@]}")
oa=$(median "${a_out[@]}"); ob=$(median "${b_out[@]}")
echo "median appended events/s: A $ia, B $ib, B/A $(awk "BEGIN {printf \"%.2f\", $ib/$ia}")"
echo "median drained events/s (1 filter + 1 count worker): A $oa, B $ob, B/A $(awk "BEGIN {printf \"%.2f\", $ob/$oa}")"
