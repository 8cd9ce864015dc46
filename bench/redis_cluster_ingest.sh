#!/usr/bin/env bash
# Ingest through POST /api/events (hotrank bench, batches of 1000 views,
# 10,000 articles, fresh visitors) on (a) one redis-server, (b) one site on
# a 3-primary Redis Cluster (--store redis-cluster: the site is one slot,
# so one primary works), (c) three sites on that cluster, one hotrank and
# one load generator each, their slots on three different primaries, run
# at the same time. Each line gives events/s and the Redis CPU (user+sys,
# INFO cpu) per event of the primary (or primaries) that did the work.
# Then (d) one site at shards = 1 against shards = 3 on the same cluster
# (issue 13), alternated 1 3 3 1, through RedisStore::ingest without HTTP
# (examples/cluster_shards_ingest.rs): events/s and each primary's Redis
# CPU per event.
# SHARDS_ONLY=1 runs (d) alone.
# Usage: bench/redis_cluster_ingest.sh   (env: DUR seconds, BIN hotrank
#   binary, default $CARGO_TARGET_DIR or target, release)
# Needs redis-server 7, redis-cli, curl; builds hotrank --release.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-8}
BIN=${BIN:-${CARGO_TARGET_DIR:-target}/release/hotrank}
BASE=${BASE:-6400}
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  for p in $BASE $((BASE + 1)) $((BASE + 2)) $((BASE + 3)); do
    redis-cli -p "$p" shutdown nosave >/dev/null 2>&1 || true
  done
  rm -rf "$TMP"
}
trap cleanup EXIT
[ -n "${SHARDS_ONLY:-}" ] || [ -x "$BIN" ] || cargo build --release --quiet --bin hotrank
start_redis() { # port [extra args]
  local port=$1; shift
  mkdir -p "$TMP/r$port"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize yes --dir "$TMP/r$port" --logfile "$TMP/r$port/log" "$@"
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
}
start_redis "$BASE"
for i in 1 2 3; do
  p=$((BASE + i))
  start_redis "$p" --cluster-enabled yes --cluster-config-file nodes.conf \
    --cluster-port $((p + 100))
done
redis-cli --cluster create 127.0.0.1:$((BASE + 1)) 127.0.0.1:$((BASE + 2)) \
  127.0.0.1:$((BASE + 3)) --cluster-yes >/dev/null
until redis-cli -p $((BASE + 1)) cluster info | grep -q 'cluster_state:ok'; do sleep 0.1; done
SEEDS="redis://127.0.0.1:$((BASE + 1)),redis://127.0.0.1:$((BASE + 2)),redis://127.0.0.1:$((BASE + 3))"

rcpu() { # Redis CPU seconds of the nodes on the given ports
  local s=0
  for p in "$@"; do
    s=$(redis-cli -p "$p" info cpu | tr -d '\r' |
      awk -F: -v s="$s" '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.3f", s}')
  done
  echo "$s"
}
serve() { # name http-port store url prefix
  cat > "$TMP/$1.toml" <<TOML
listen = "127.0.0.1:$2"
data_dir = "$TMP/data-$1"
store = "redis"
[gate]
ip_limit_per_minute = 0   # one load generator is one IP
[redis]
url = "$4"
prefix = "$5"
cluster = $3
TOML
  RUST_LOG=warn "$BIN" serve --config "$TMP/$1.toml" & PIDS+=($!)
  until curl -sf "localhost:$2/readyz" >/dev/null; do sleep 0.1; done
}
load() { # http-port -> events/s
  "$BIN" bench --target "127.0.0.1:$1" --duration-secs "$DUR" --batch 1000 \
    --connections 4 | sed -E 's/.*: ([0-9]+) events\/s.*/\1/'
}
# The primary serving a site's slot.
primary_of() {
  local slot
  slot=$(redis-cli -p $((BASE + 1)) cluster keyslot "{$1}changes:seq")
  redis-cli -p $((BASE + 1)) cluster nodes | tr -d '\r' | awk -v s="$slot" '
    $3 ~ /master/ { for (i = 9; i <= NF; i++) { split($i, r, "-"); if (r[2] == "") r[2] = r[1];
      if (s + 0 >= r[1] + 0 && s + 0 <= r[2] + 0) { split($2, a, "[:@]"); print a[2] } } }'
}
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"

shards_runs() { # (d): one site, 1 shard against 3, same cluster
  local ex=${CARGO_TARGET_DIR:-target}/release/examples/cluster_shards_ingest
  [ -x "$ex" ] || cargo build --release --quiet --example cluster_shards_ingest
  SEEDS="$SEEDS" PORTS="$((BASE + 1)),$((BASE + 2)),$((BASE + 3))" "$ex" "$DUR" "${RUNS:-4}"
}
if [ -n "${SHARDS_ONLY:-}" ]; then
  shards_runs
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  exit 0
fi

serve one 18101 false "redis://127.0.0.1:$BASE/0" ""
c0=$(rcpu "$BASE"); ev=$(load 18101); c1=$(rcpu "$BASE")
echo "one redis:               $ev events/s, redis $(awk "BEGIN {printf \"%.1f\", ($c1 - $c0) * 1e6 / ($ev * $DUR)}") us/event"

serve c0 18102 true "$SEEDS" "s0:"
P=$(primary_of "s0:")
c0=$(rcpu "$P"); ev=$(load 18102); c1=$(rcpu "$P")
echo "cluster, one site:       $ev events/s, its primary $(awk "BEGIN {printf \"%.1f\", ($c1 - $c0) * 1e6 / ($ev * $DUR)}") us/event (port $P)"

# Three sites whose slots are on three different primaries.
declare -A used=()
sites=()
for n in $(seq 1 200); do
  p=$(primary_of "m$n:")
  if [ -z "${used[$p]:-}" ]; then used[$p]=1; sites+=("m$n:"); fi
  [ "${#sites[@]}" = 3 ] && break
done
ports=()
for i in 0 1 2; do
  serve "m$i" $((18110 + i)) true "$SEEDS" "${sites[$i]}"
  ports+=($((18110 + i)))
done
c0=$(rcpu $((BASE + 1)) $((BASE + 2)) $((BASE + 3)))
for i in 0 1 2; do load "${ports[$i]}" > "$TMP/ev$i" & done
wait_loads() { while [ "$(cat "$TMP"/ev0 "$TMP"/ev1 "$TMP"/ev2 2>/dev/null | wc -l)" -lt 3 ]; do sleep 0.2; done; }
wait_loads
c1=$(rcpu $((BASE + 1)) $((BASE + 2)) $((BASE + 3)))
total=$(cat "$TMP"/ev0 "$TMP"/ev1 "$TMP"/ev2 | awk '{s += $1} END {print s}')
echo "cluster, three sites:    $total events/s in all ($(cat "$TMP"/ev0 "$TMP"/ev1 "$TMP"/ev2 | paste -sd+)), primaries $(awk "BEGIN {printf \"%.1f\", ($c1 - $c0) * 1e6 / ($total * $DUR)}") us/event"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
shards_runs
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
