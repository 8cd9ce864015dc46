#!/usr/bin/env bash
# Two builds side by side in one run (same machine, same flags): did a
# change cost anything? Embedded ingest (per fsync policy and batch shape)
# and `GET /api/hot` latency at QUERY_ARTICLES articles while events keep
# arriving at QUERY_RATE a second. Not part of CI.
#
#   bench/ab.sh OLD_BIN NEW_BIN      # e.g. a build of main vs this branch
#   DUR=8 ROUNDS=3 FSYNCS=always SHAPES="1:50" CASES="ingest query" bench/ab.sh ...
#   EXTRA_TOML='[limits]\nqueries_per_minute_per_ip = 0' ...   # for builds with query budgets
# Runs alternate old/new ROUNDS times per case (ABBA order); the per-second lines of
# `hotrank bench` are dropped, one summary line per run is kept.
set -euo pipefail
OLD=$1 NEW=$2
DUR=${DUR:-8}
ROUNDS=${ROUNDS:-1}
FSYNCS=${FSYNCS:-always interval}
SHAPES=${SHAPES:-1000:4 1:50}   # batch:connections
CASES=${CASES:-ingest query}
QUERY_ARTICLES=${QUERY_ARTICLES:-100000}
QUERY_RATE=${QUERY_RATE:-2000}
EXTRA_TOML=${EXTRA_TOML:-}
TMP=$(mktemp -d)
PID=
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

start() { # bin fsync dir -> PORT, PID; every run starts from an empty data dir
  local bin=$1 fsync=$2 dir=$3
  rm -rf "$dir"
  mkdir -p "$dir"
  printf '[gate]\nip_limit_per_minute = 0\nvisitor_limit_per_minute = 0\n[embedded]\nfsync = "%s"\n' "$fsync" > "$dir/hotrank.toml"
  [ -n "$EXTRA_TOML" ] && printf "$EXTRA_TOML\n" >> "$dir/hotrank.toml"
  for _ in 1 2 3; do # a free port can be taken before we bind it: try another
    PORT=$(free_port)
    "$bin" serve --config "$dir/hotrank.toml" --data-dir "$dir/data" --listen "127.0.0.1:$PORT" >"$dir/log" 2>&1 &
    PID=$!
    until curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null; do
      kill -0 "$PID" 2>/dev/null || break
      sleep 0.05
    done
    kill -0 "$PID" 2>/dev/null && return 0
  done
  echo "server did not start: $(tail -1 "$dir/log")" >&2
  exit 1
}

run() { # label bin fsync batch connections
  local label=$1 bin=$2 fsync=$3 batch=$4 conns=$5 port
  start "$bin" "$fsync" "$TMP/$label-$fsync-$batch"
  port=$PORT
  printf '%-4s fsync=%-8s batch=%-5s ' "$label" "$fsync" "$batch"
  "$NEW" bench --target "127.0.0.1:$port" --articles 10000 --zipf 0 --visitors 1000000000 \
    --repeat-rate 0 --bot-share 0 --flood-share 0 --batch "$batch" --connections "$conns" \
    --duration-secs "$DUR" --label "$label" 2>/dev/null
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
}

query() { # label bin
  local label=$1 bin=$2 feed
  start "$bin" always "$TMP/$label-query"
  "$NEW" bench --target "127.0.0.1:$PORT" --preload --articles "$QUERY_ARTICLES" --batch 1000 >/dev/null 2>&1
  curl -sf "http://127.0.0.1:$PORT/api/hot?range=72h&limit=20" >/dev/null  # the first build
  "$NEW" bench --target "127.0.0.1:$PORT" --articles "$QUERY_ARTICLES" --rate "$QUERY_RATE" --batch 100 \
    --connections 2 --duration-secs $((DUR + 4)) >/dev/null 2>&1 &
  feed=$!
  sleep 1
  printf '%-4s GET /api/hot?range=72h&limit=20 at %s articles, %s events/s: ' "$label" "$QUERY_ARTICLES" "$QUERY_RATE"
  "$NEW" bench --target "127.0.0.1:$PORT" --query "/api/hot?range=72h&limit=20" --connections 1 \
    --duration-secs "$DUR" --label "$label" 2>/dev/null
  wait "$feed" 2>/dev/null || true
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=
}

echo "# A/B — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, ${DUR}s per run"
if [[ " $CASES " == *" query "* ]]; then
  for r in $(seq "$ROUNDS"); do
    if (( r % 2 )); then query old "$OLD"; query new "$NEW"; else query new "$NEW"; query old "$OLD"; fi
  done
fi
[[ " $CASES " == *" ingest "* ]] || exit 0
for fsync in $FSYNCS; do
  for shape in $SHAPES; do
    for r in $(seq "$ROUNDS"); do
      # ABBA order: a machine that slows down (or warms up) over the runs
      # must not favour whichever build always goes first.
      if (( r % 2 )); then
        run old "$OLD" "$fsync" "${shape%%:*}" "${shape##*:}"
        run new "$NEW" "$fsync" "${shape%%:*}" "${shape##*:}"
      else
        run new "$NEW" "$fsync" "${shape%%:*}" "${shape##*:}"
        run old "$OLD" "$fsync" "${shape%%:*}" "${shape##*:}"
      fi
    done
  done
done
