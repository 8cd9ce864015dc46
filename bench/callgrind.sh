#!/usr/bin/env bash
# Instructions the server executes per counted event (or per request of the
# empty handler), under valgrind's callgrind: repeatable whatever else the
# machine is doing, unlike wall-clock runs on a shared machine. Not part of CI.
#
#   bench/callgrind.sh BIN [BATCH] [CONNECTIONS] [SECONDS]
#     BATCH 1 sends single POST /api/views, more POST /api/events batches.
#   FSYNC=interval bench/callgrind.sh ...      # the log's fsync policy
#   FLOOR=1 bench/callgrind.sh BIN              # `hotrank bench-floor`, the
#                                               # empty axum handler
#   KEEP=DIR ...                                # keep callgrind.out (for
#                                               # callgrind_annotate) in DIR
# The server's counters are zeroed after a one-second warm-up
# (callgrind_control -z) and dumped after the measured run, so start-up and
# shutdown are not counted. Needs valgrind and curl.
set -euo pipefail
BIN=$(realpath "$1")
BATCH=${2:-1000}
CONNS=${3:-$([ "$BATCH" = 1 ] && echo 8 || echo 2)}
DUR=${4:-6}
FSYNC=${FSYNC:-always}
DIR=${KEEP:-$(mktemp -d)}
mkdir -p "$DIR"
PID=
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
  [ -z "${KEEP:-}" ] && rm -rf "$DIR"
  true
}
trap cleanup EXIT
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
load() { # seconds [json]
  "$BIN" bench --target "127.0.0.1:$PORT" --articles 10000 --zipf 0 --visitors 1000000000 \
    --repeat-rate 0 --bot-share 0 --flood-share 0 --batch "$BATCH" --connections "$CONNS" \
    --duration-secs "$1" ${2:+--json "$2"} >/dev/null 2>&1
}
counted() { curl -sf "http://127.0.0.1:$PORT/api/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["counted"])'; }

if [ -n "${FLOOR:-}" ]; then
  valgrind --tool=callgrind --callgrind-out-file="$DIR/callgrind.out" \
    "$BIN" bench-floor --listen "127.0.0.1:$PORT" >"$DIR/log" 2>&1 &
  PID=$!
  until curl -s -o /dev/null "127.0.0.1:$PORT/api/views"; do sleep 0.2; done
else
  printf '[gate]\nip_limit_per_minute = 0\nvisitor_limit_per_minute = 0\n[embedded]\nfsync = "%s"\n' "$FSYNC" >"$DIR/hotrank.toml"
  valgrind --tool=callgrind --callgrind-out-file="$DIR/callgrind.out" \
    "$BIN" serve --config "$DIR/hotrank.toml" --data-dir "$DIR/data" --listen "127.0.0.1:$PORT" >"$DIR/log" 2>&1 &
  PID=$!
  until curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null; do
    kill -0 "$PID" 2>/dev/null || { tail -3 "$DIR/log"; exit 1; }
    sleep 0.2
  done
fi
echo "warming up, then ${DUR}s measured (the server runs ~50x slower under callgrind)" >&2
load 1
[ -z "${FLOOR:-}" ] && c0=$(counted)
callgrind_control -z "$PID" >/dev/null
load "$DUR" "$DIR/run.json"
callgrind_control -d "$PID" >/dev/null
if [ -n "${FLOOR:-}" ]; then
  n=$(python3 -c "import json; print(json.load(open('$DIR/run.json'))['requests'])")
  what=requests
else
  n=$(( $(counted) - c0 ))
  what=events
fi
dump=$(ls "$DIR"/callgrind.out.* | sort -V | head -1)
ir=$(callgrind_annotate "$dump" 2>/dev/null | grep -m1 'PROGRAM TOTALS' | awk '{gsub(",","",$1); print $1}')
echo "$(basename "$BIN") batch=$BATCH fsync=$FSYNC${FLOOR:+ (empty handler)}: $n $what, $ir instructions, $((ir / n)) per ${what%s}"
