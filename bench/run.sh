#!/usr/bin/env bash
# hotrank against seed 000's own Redis design, on this machine, in one run.
# Every scenario prints its figures and a ratio; results (JSON) go to
# $OUT (default target/bench). Needs: redis-server, redis-benchmark, gcc
# (for bench/seed/seqbench.c), curl. Not part of CI.
#
#   bench/run.sh              # all scenarios (about 12 minutes on 2 cores)
#   bench/run.sh 1 3          # only scenarios 1 and 3
#   SCALE=0.1 bench/run.sh    # 10x fewer articles/events, for a quick look
#   S3_ARTICLES=10000000 bench/run.sh 3   # scenario 3 at 10 M articles (issue 33,
#                             # "Queries at 10x"; RSS about 6-7 GB: check `free -g`)
#   BATCHES=1 bench/run.sh 1  # scenario 1's batch rows only (batches of 1000
#                             # and 100, no baselines): an A/B of two builds
#   VIEWS=1 bench/run.sh 1    # scenario 1's single-view rows only, with their
#                             # baselines (the seed script on an appendfsync-
#                             # always Redis, the empty handler), and the log's
#                             # fsyncs per event under fsync always
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
SEED=${SEED:-$ROOT/bench/seed}
OUT=${OUT:-$ROOT/target/bench}
SCALE=${SCALE:-1}
DUR=${DUR:-8}
mkdir -p "$OUT"
TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT

SCENARIOS="$*"
want() { [ -z "$SCENARIOS" ] || [[ " $SCENARIOS " == *" $1 "* ]]; }
n() { python3 -c "print(int($1 * $SCALE))"; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ratio() { python3 -c "a,b=$1,$2; print(f'{a/b:.2f}x' if b else 'n/a')"; }
field() { python3 -c "import json,sys; print(json.load(open('$1'))['$2'])"; }

# BIN=path/to/hotrank runs that binary (an A/B of two builds) instead of
# building this checkout.
if [ -z "${BIN:-}" ]; then
  cargo build --release --quiet
  BIN=${CARGO_TARGET_DIR:-$ROOT/target}/release/hotrank
fi
gcc -O2 -o "$TMP/seqbench" "$SEED/seqbench.c" -lm

start_redis() { # port [extra redis-server args] -> pid in PIDS
  local port=$1; shift
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --daemonize no --logfile "$TMP/redis-$port.log" "$@" &
  PIDS+=($!)
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.05; done
}
stop_redis() { redis-cli -p "$1" shutdown nosave >/dev/null 2>&1 || true; }

start_hotrank() { # port datadir extra-toml...
  local port=$1 dir=$2; shift 2
  mkdir -p "$dir"
  { echo "listen = \"127.0.0.1:$port\""; echo "data_dir = \"$dir/data\""; echo 'ingest_token = "bench-ingest-token"'; printf '%s\n' "$@"; } > "$dir/hotrank.toml"
  RUST_LOG=warn "$BIN" serve --config "$dir/hotrank.toml" > "$dir/log" 2>&1 &
  HPID=$!
  PIDS+=($HPID)
  until curl -sf "127.0.0.1:$port/healthz" >/dev/null; do sleep 0.05; done
}
stop_hotrank() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
# LOADGEN=path/to/hotrank drives the load with that build's `hotrank
# bench` (one with every option this script uses) against any BIN.
bench() { "${LOADGEN:-$BIN}" bench "$@" 2>/dev/null; }
ready() { until curl -sf "127.0.0.1:$1/readyz" >/dev/null; do sleep 0.05; done; }
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

echo "# hotrank benchmarks — $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) cores, $(redis-server --version | cut -d' ' -f3)"

if want 1; then
  echo; echo "## 1. Ingest, embedded store, vs seed 000's script on redis-server"
fi
if want 1 && [ -z "${VIEWS:-}" ] && [ -z "${BATCHES:-}" ]; then
  RP=$(free_port); start_redis "$RP"
  SHA=$(redis-cli -p "$RP" SCRIPT LOAD "$(cat "$SEED/seed_view.lua")")
  "$TMP/seqbench" -p "$RP" -c 50 -P 16 -d "$DUR" -a 10000 -V 1000000000 -m script -s "$SHA" | tee "$OUT/seed-script-p16.txt"
  SEEDEPS=$(grep -o 'events_per_s=[0-9.]*' "$OUT/seed-script-p16.txt" | cut -d= -f2)
  "$TMP/seqbench" -p "$RP" -c 50 -P 16 -d "$DUR" -a 10000 -V 1000000000 -m dedupe -s "$SHA" | tee "$OUT/seed-dedupe-p16.txt"
  SEEDD=$(grep -o 'events_per_s=[0-9.]*' "$OUT/seed-dedupe-p16.txt" | cut -d= -f2)
  INCR=$(redis-benchmark -p "$RP" -P 16 -n 2000000 -q -t incr | grep -o '[0-9.]* requests per second' | cut -d' ' -f1)
  echo "raw INCR P=16: $INCR requests/s"
  stop_redis "$RP"
fi
if want 1 && [ -z "${BATCHES:-}" ]; then
  # The durable baseline for single views: the seed's script, one request
  # per round trip from 50 connections (as hotrank's single views), on a
  # Redis that fsyncs its append-only file before every reply.
  RP=$(free_port); start_redis "$RP" --appendonly yes --appendfsync always --dir "$TMP"
  SHA=$(redis-cli -p "$RP" SCRIPT LOAD "$(cat "$SEED/seed_view.lua")")
  "$TMP/seqbench" -p "$RP" -c 50 -P 1 -d "$DUR" -a 10000 -V 1000000000 -m script -s "$SHA" | tee "$OUT/seed-script-aof-always-c50.txt"
  SEEDAOF=$(grep -o 'events_per_s=[0-9.]*' "$OUT/seed-script-aof-always-c50.txt" | cut -d= -f2)
  stop_redis "$RP"
fi
if want 1; then
  EV=(--articles 10000 --zipf 0 --visitors 1000000000 --repeat-rate 0 --bot-share 0 --flood-share 0)
  HP=$(free_port); start_hotrank "$HP" "$TMP/s1" '[gate]' 'ip_limit_per_minute = 0'
  if [ -z "${VIEWS:-}" ]; then
    bench --target "127.0.0.1:$HP" "${EV[@]}" --batch 1000 --connections 4 --duration-secs "$DUR" --json "$OUT/s1-batch1000.json" --label batch1000
    bench --target "127.0.0.1:$HP" "${EV[@]}" --batch 100 --connections 8 --duration-secs "$DUR" --json "$OUT/s1-batch100.json" --label batch100
  fi
  if [ -z "${BATCHES:-}" ]; then
    # The log's syncs over the single views alone: the fsync histogram's
    # count and the records written, before and after.
    wal() { curl -s "127.0.0.1:$1/metrics" | awk '/^hotrank_wal_fsync_seconds_count /{f=$2} /^hotrank_wal_records_total /{r=$2} END{print f+0, r+0}'; }
    read -r F0 R0 < <(wal "$HP")
    bench --target "127.0.0.1:$HP" "${EV[@]}" --batch 1 --connections 50 --duration-secs "$DUR" --json "$OUT/s1-views.json" --label views
    read -r F1 R1 < <(wal "$HP")
    SYNCS=$(python3 -c "f,r=$F1-$F0,$R1-$R0; print(f'{f/r:.4f} ({r/f:.1f} events per sync)' if f and r else 'n/a')")
  fi
  stop_hotrank "$HPID"
  if [ -z "${VIEWS:-}" ] && [ -z "${BATCHES:-}" ]; then
    # One runtime worker thread against the default (one per core).
    HP=$(free_port); TOKIO_WORKER_THREADS=1 start_hotrank "$HP" "$TMP/s1t1" '[gate]' 'ip_limit_per_minute = 0'
    bench --target "127.0.0.1:$HP" "${EV[@]}" --batch 1000 --connections 4 --duration-secs "$DUR" --json "$OUT/s1-batch1000-t1.json" --label batch1000-1thread
    stop_hotrank "$HPID"
  fi
  if [ -z "${BATCHES:-}" ]; then
    HP=$(free_port); start_hotrank "$HP" "$TMP/s1i" '[gate]' 'ip_limit_per_minute = 0' '[embedded]' 'fsync = "interval"'
    bench --target "127.0.0.1:$HP" "${EV[@]}" --batch 1 --connections 50 --duration-secs "$DUR" --json "$OUT/s1-views-interval.json" --label views-interval
    stop_hotrank "$HPID"
    FP=$(free_port); "$BIN" bench-floor --listen "127.0.0.1:$FP" 2>/dev/null & PIDS+=($!); FLOORPID=$!
    until curl -s -o /dev/null "127.0.0.1:$FP/api/views" 2>/dev/null; do sleep 0.05; done
    bench --target "127.0.0.1:$FP" --batch 1 --connections 50 --duration-secs "$DUR" --json "$OUT/s1-floor.json" --label floor
    kill "$FLOORPID"
    V1=$(field "$OUT/s1-views.json" events_per_sec); FL=$(field "$OUT/s1-floor.json" events_per_sec)
    VI=$(field "$OUT/s1-views-interval.json" events_per_sec)
  fi
  printf '| load | events/s | ratio |\n|---|---|---|\n'
fi
if want 1 && [ -z "${VIEWS:-}" ]; then
  B1000=$(field "$OUT/s1-batch1000.json" events_per_sec); B100=$(field "$OUT/s1-batch100.json" events_per_sec)
fi
if want 1 && [ -n "${BATCHES:-}" ]; then
  printf '| hotrank batch 1000 (gated, fsync always) | %.0f | |\n| hotrank batch 100 | %.0f | |\n' "$B1000" "$B100"
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
if want 1 && [ -z "${VIEWS:-}" ] && [ -z "${BATCHES:-}" ]; then
  T1=$(field "$OUT/s1-batch1000-t1.json" events_per_sec)
  printf '| seed script EVALSHA P=16 | %.0f | 1.00x |\n' "$SEEDEPS"
  printf '| seed dedupe+script P=16 | %.0f | %s |\n' "$SEEDD" "$(ratio "$SEEDD" "$SEEDEPS")"
  printf '| raw INCR P=16 | %.0f | %s |\n' "$INCR" "$(ratio "$INCR" "$SEEDEPS")"
  printf '| hotrank batch 1000 (gated, fsync always) | %.0f | %s (goal >= 10x; moonshot > raw INCR: %s) |\n' "$B1000" "$(ratio "$B1000" "$SEEDEPS")" "$(ratio "$B1000" "$INCR")"
  printf '| hotrank batch 1000, 1 worker thread (TOKIO_WORKER_THREADS=1) | %.0f | the default (one per core) does %s of it |\n' "$T1" "$(ratio "$B1000" "$T1")"
  printf '| hotrank batch 100 | %.0f | %s |\n' "$B100" "$(ratio "$B100" "$SEEDEPS")"
fi
if want 1 && [ -z "${BATCHES:-}" ]; then
  printf '| seed script P=1, 50 connections, Redis appendfsync always | %.0f | %s |\n' "$SEEDAOF" "$(if [ -n "${SEEDEPS:-}" ]; then ratio "$SEEDAOF" "$SEEDEPS"; fi)"
  printf '| hotrank single POST /api/views, fsync always | %.0f | %s of the seed script on an appendfsync-always Redis, 50 connections (goal >= 1) |\n' "$V1" "$(ratio "$V1" "$SEEDAOF")"
  printf '| hotrank single POST /api/views, fsync interval | %.0f | %s of the empty axum handler (goal >= 0.8) |\n' "$VI" "$(ratio "$VI" "$FL")"
  printf '| empty axum handler, single requests | %.0f | |\n' "$FL"
  echo "log syncs per single view (fsync always, 50 connections): $SYNCS"
fi

if want 3; then
  ART=${S3_ARTICLES:-$(n 1000000)}
  echo; echo "## 3. GET /api/hot?range=72h&limit=20 with $ART live articles and 10,000 updates/s"
  # max_articles = 0: the preload's untrusted events may create every
  # article (the default cap, 1 M, would stop a larger preload there).
  S3CONF=('max_articles = 0' '[gate]' 'ip_limit_per_minute = 0' '[embedded]' 'snapshot_every_records = 1000000000' 'snapshot_interval_secs = 100000' '[limits]' 'queries_per_minute_per_ip = 0')
  HP=$(free_port); start_hotrank "$HP" "$TMP/s3" "${S3CONF[@]}"
  T0=$(date +%s.%N)
  bench --target "127.0.0.1:$HP" --preload --articles "$ART" --batch 1000 --connections 4 --duration-secs 600 --label preload >/dev/null
  BASE=$(rss_kb "$HPID")
  echo "preload of $ART articles: $(python3 -c "print(round($(date +%s.%N)-$T0))") s, $(curl -s "127.0.0.1:$HP/api/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["counted"])') events counted; RSS ${BASE} kB"
  # The server's own figures from here to the end of the queries (what
  # the load generators and the scheduler add is the difference).
  curl -s "127.0.0.1:$HP/metrics" > "$OUT/s3-metrics-before.txt"
  bench --target "127.0.0.1:$HP" --articles "$ART" --zipf 1.0 --visitors 10000000 --batch 100 --connections 2 --rate 10000 --duration-secs $((DUR + 4)) --token bench-ingest-token --json "$OUT/s3-updates.json" --label updates &
  UPD=$!
  sleep 2
  curl -s "127.0.0.1:$HP/metrics" > "$OUT/s3-metrics-queries.txt"
  bench --target "127.0.0.1:$HP" --query "/api/hot?range=72h&limit=20" --connections 1 --duration-secs "$DUR" --json "$OUT/s3-query.json" --label query
  wait "$UPD"
  echo "p99 $(field "$OUT/s3-query.json" p99_us) us (goal <= 1000 us; Redis's own ZREVRANGE 0 19 on 1 M members: about 130 us); updates kept at $(field "$OUT/s3-updates.json" events_per_sec) events/s; RSS ${BASE} kB"
  python3 -c "import json; d=json.load(open('$OUT/s3-updates.json')); print('ingest meanwhile (batches of 100): p50 %s us, p99 %s us, max %s us (goal: never waits > 10 ms for a ranking build)' % (d['p50_us'], d['p99_us'], d['max_us']))"
  curl -s "127.0.0.1:$HP/metrics" > "$OUT/s3-metrics-after.txt"
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg); RSS after the queries $(rss_kb "$HPID") kB"
  echo "server side, from the start of the updates:"
  python3 bench/metrics_window.py "$OUT/s3-metrics-before.txt" "$OUT/s3-metrics-after.txt"
  echo "server side, from the first query:"
  python3 bench/metrics_window.py "$OUT/s3-metrics-queries.txt" "$OUT/s3-metrics-after.txt"
  # The first query after a restart: stop (a snapshot), start, wait for
  # /readyz, then one /api/hot.
  T0=$(date +%s.%N); stop_hotrank "$HPID"; T1=$(date +%s.%N)
  echo "stop (snapshot written at shutdown): $(python3 -c "print(round(($T1-$T0)*1000))") ms; snapshot $(du -sh "$TMP/s3/data/snapshots" 2>/dev/null | cut -f1)"
  T0=$(date +%s.%N); start_hotrank "$HP" "$TMP/s3" "${S3CONF[@]}"
  until curl -sf "127.0.0.1:$HP/readyz" >/dev/null; do sleep 0.05; done
  T1=$(date +%s.%N)
  # Server side, each query alone: the store's time and the whole
  # request's, from the histograms' sums between scrapes.
  hotsum() { curl -s "127.0.0.1:$HP/metrics" | awk '/^hotrank_query_seconds_sum\{endpoint="hot"\}/ {q = $2} /^hotrank_http_request_seconds_sum\{.*route="\/api\/hot"/ {h = $2} END {printf "%.6f %.6f\n", q, h}'; }
  S0=$(hotsum)
  FIRST=$(curl -s -o /dev/null -w '%{time_total}' "127.0.0.1:$HP/api/hot?range=72h&limit=20")
  S1=$(hotsum)
  SECOND=$(curl -s -o /dev/null -w '%{time_total}' "127.0.0.1:$HP/api/hot?range=72h&limit=20")
  S2=$(hotsum)
  python3 -c "a,b,c=[list(map(float,x.split())) for x in ('$S0','$S1','$S2')]; print('server side: first query store %d us, request %d us; second store %d us, request %d us' % tuple(round(v*1e6) for v in (b[0]-a[0], b[1]-a[1], c[0]-b[0], c[1]-b[1])))"
  echo "restart: /readyz 200 after $(python3 -c "print(round(($T1-$T0)*1000))") ms; first /api/hot after it $(python3 -c "print(round($FIRST*1e6))") us, second $(python3 -c "print(round($SECOND*1e6))") us (curl, new connection each); RSS $(rss_kb "$HPID") kB; load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  stop_hotrank "$HPID"
fi

if want 4; then
  ART=$(n 1000000)
  echo; echo "## 4. model=window&range=72h over $ART articles spread over 72 hourly buckets, with ingest running"
  HP=$(free_port); start_hotrank "$HP" "$TMP/s4" '[gate]' 'ip_limit_per_minute = 0' 'visitor_limit_per_minute = 0' '[embedded]' 'snapshot_every_records = 1000000000' 'snapshot_interval_secs = 100000' '[limits]' 'queries_per_minute_per_ip = 0'
  bench --target "127.0.0.1:$HP" --preload --articles "$ART" --spread-secs $((72 * 3600 - 60)) --token bench-ingest-token --batch 1000 --connections 4 --duration-secs 600 >/dev/null
  bench --target "127.0.0.1:$HP" --articles "$ART" --zipf 1.0 --batch 100 --connections 2 --rate 10000 --duration-secs $((DUR + 4)) --token bench-ingest-token >/dev/null &
  UPD=$!
  sleep 2
  bench --target "127.0.0.1:$HP" --query "/api/hot?model=window&range=72h&limit=20" --connections 1 --duration-secs "$DUR" --json "$OUT/s4-query.json" --label window
  wait "$UPD"
  stop_hotrank "$HPID"
  RP=$(free_port); start_redis "$RP"
  MEMBERS=$(n 100000)
  for h in $(seq 1 72); do
    redis-cli -p "$RP" EVAL "for i=1,tonumber(ARGV[1]) do redis.call('ZADD', KEYS[1], math.random(1,100), 'a'..math.random(1,tonumber(ARGV[2]))) end" 1 "day:$h" "$MEMBERS" "$ART" >/dev/null
  done
  KEYS=$(for h in $(seq 1 72); do printf 'day:%s ' "$h"; done)
  T0=$(date +%s.%N)
  redis-cli -p "$RP" ZUNIONSTORE dest 72 $KEYS >/dev/null
  redis-cli -p "$RP" ZREVRANGE dest 0 19 >/dev/null
  T1=$(date +%s.%N)
  SEEDMS=$(python3 -c "print(round(($T1-$T0)*1000))")
  stop_redis "$RP"
  P99=$(field "$OUT/s4-query.json" p99_us)
  echo "hotrank p99 $P99 us (goal <= 5000 us) vs seed ZUNIONSTORE of 72 x $MEMBERS + ZREVRANGE: $SEEDMS ms per query: $(ratio "$SEEDMS*1000" "$P99") faster"
fi

if want 5; then
  echo; echo "## 5. Freshness: served top 20 vs the exact top 20, 50 query times over a 72-hour stream"
  cargo run --release --quiet --example freshness -- --json "$OUT/s5-freshness.json"
fi

if want 6; then
  # The gate's state in process, counted by allocation (exact, not RSS):
  # bytes per dedupe pair at 1 M pairs, per visitor's rate + behaviour
  # state, per article with 100 visitors (issue 33, "Gate memory").
  echo; echo "## 6. Gate memory in process (examples/gate_memory.rs)"
  cargo run --release --quiet --example gate_memory
  # Memory per tracked article for the same traffic in both designs: N
  # views per article, each from a visitor of its own (so hotrank also
  # holds each visitor's gate state: dedupe pair, rate-limit log,
  # behaviour entry). The seed twice: its view script alone (no state
  # per visitor), and with its dedupe step before it (seed 000: "SETEX +
  # 判重", one `SET dedup:V:A 1 NX EX 900` key per (visitor, article)
  # pair, the state hotrank's dedupe pairs hold).
  # hotrank: RSS growth of the server; seed: used_memory growth of Redis.
  seedmem() { # articles views-per-article extra-bench-args...
    local art=$1 per=$2 rp m0 m1
    shift 2
    rp=$(free_port); start_redis "$rp"
    m0=$(redis-cli -p "$rp" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
    bench --seed-redis "127.0.0.1:$rp" --seed-script "$SEED/seed_view.lua" "$@" --preload --preload-visitors "$per" --articles "$art" --connections 8 --pipeline 16 --duration-secs 1200 >/dev/null
    m1=$(redis-cli -p "$rp" info memory | awk -F: '/^used_memory:/ {print $2}' | tr -d '\r')
    stop_redis "$rp"
    python3 -c "print(round(($m1-$m0)/$art))"
  }
  mem6() { # articles views-per-article goal-vs-seed-keys goal-vs-seed-keys-with-dedupe
    local art=$1 per=$2 hp r0 r1 h s sd
    echo; echo "## 6. Memory per tracked article ($art articles, $per view(s) each, each from its own visitor)"
    hp=$(free_port); start_hotrank "$hp" "$TMP/s6-$per" '[gate]' 'ip_limit_per_minute = 0'
    r0=$(rss_kb "$HPID")
    bench --target "127.0.0.1:$hp" --preload --preload-visitors "$per" --articles "$art" --batch 1000 --connections 4 --duration-secs 1200 >/dev/null
    curl -s "127.0.0.1:$hp/api/hot?limit=1" >/dev/null
    r1=$(rss_kb "$HPID")
    stop_hotrank "$HPID"
    h=$(python3 -c "print(round(($r1-$r0)*1024/$art))")
    s=$(seedmem "$art" "$per")
    sd=$(seedmem "$art" "$per" --seed-dedupe)
    echo "hotrank embedded: $h bytes/article (RSS growth); seed keys in Redis: $s bytes/article (used_memory growth); ratio $(ratio "$h" "$s") (goal <= $3)"
    local goal="goal <= $4"
    [ "$4" = - ] && goal="no goal at this size"
    echo "seed keys with its dedupe keys (the view script after SET dedup:V:A NX EX 900): $sd bytes/article; hotrank ratio $(ratio "$h" "$sd") ($goal)"
  }
  mem6 "$(n 200000)" 1 1 -
  mem6 "$(n 20000)" 100 1 2
fi

if want 7; then
  EV=$(n 10000000)
  echo; echo "## 7. Restart with $EV logged events"
  HP=$(free_port); start_hotrank "$HP" "$TMP/s7" '[gate]' 'ip_limit_per_minute = 0' 'visitor_limit_per_minute = 0' '[embedded]' 'snapshot_every_records = 1000000000' 'snapshot_interval_secs = 100000'
  bench --target "127.0.0.1:$HP" --articles 100000 --zipf 1.0 --visitors 100000000 --repeat-rate 0 --bot-share 0 --flood-share 0 --batch 1000 --connections 4 --duration-secs 600 --json "$OUT/s7-load.json" >/dev/null &
  LOAD=$!
  while [ "$(curl -s "127.0.0.1:$HP/api/stats" | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["counted"]+d["quarantinedTotal"])')" -lt "$EV" ]; do sleep 1; done
  kill "$LOAD" 2>/dev/null || true; wait "$LOAD" 2>/dev/null || true
  kill -9 "$HPID"; wait "$HPID" 2>/dev/null || true
  T0=$(date +%s.%N); start_hotrank "$HP" "$TMP/s7"; ready "$HP"; T1=$(date +%s.%N)
  LOGMS=$(python3 -c "print(round(($T1-$T0)*1000))")
  stop_hotrank "$HPID"  # graceful: writes a snapshot
  T0=$(date +%s.%N); start_hotrank "$HP" "$TMP/s7"; ready "$HP"; T1=$(date +%s.%N)
  SNAPMS=$(python3 -c "print(round(($T1-$T0)*1000))")
  stop_hotrank "$HPID"
  echo "restart to /readyz from the log alone: $LOGMS ms; from a snapshot: $SNAPMS ms (goal <= 5000 ms); ratio $(ratio "$LOGMS" "$SNAPMS")"
fi

if want 8; then
  ART=$(n 2000000)
  echo; echo "## 8. Ingest while a snapshot of $ART articles is written"
  # The snapshot starts when the log holds ART + 40,000 records: about 4 s
  # into a 10,000 events/s load of batches of 100 (one record per event).
  HP=$(free_port); start_hotrank "$HP" "$TMP/s8" 'max_articles = 0' '[gate]' 'ip_limit_per_minute = 0' '[embedded]' "snapshot_every_records = $((ART + 40000))" 'snapshot_interval_secs = 100000'
  bench --target "127.0.0.1:$HP" --preload --articles "$ART" --batch 1000 --connections 4 --duration-secs 600 >/dev/null
  # The default ranking takes in the preload's 2 M new articles (a query
  # catches up, then the upkeep): settled before the measured window, so
  # what it measures is the snapshot, not that catch-up.
  curl -s "127.0.0.1:$HP/api/hot?limit=20" >/dev/null
  upkept() { curl -s "127.0.0.1:$HP/metrics" | awk '/^hotrank_lock_hold_seconds_count\{what="upkeep"\}/ {n = $2} END {print n + 0}'; }
  prev=-1; now=$(upkept)
  while [ "$now" != "$prev" ]; do prev=$now; sleep 3; now=$(upkept); done
  bench --target "127.0.0.1:$HP" --articles "$ART" --zipf 1.0 --visitors 10000000 --batch 100 --connections 2 --rate 10000 --duration-secs $((DUR + 8)) --token bench-ingest-token --json "$OUT/s8-updates.json" --label during-snapshot
  # (Wait for the snapshot to end, at most 60 s.)
  for _ in $(seq 60); do
    curl -s "127.0.0.1:$HP/metrics" | awk '/^hotrank_snapshot_seconds_count/ {n = $2} END {exit !(n >= 1)}' && break
    sleep 1
  done
  curl -s "127.0.0.1:$HP/metrics" > "$OUT/s8-metrics.txt"
  # The same load on the same store with no snapshot due (the next one
  # needs another ART + 40,000 records): what the machine gives anyway.
  bench --target "127.0.0.1:$HP" --articles "$ART" --zipf 1.0 --visitors 10000000 --batch 100 --connections 2 --rate 10000 --duration-secs "$DUR" --token bench-ingest-token --json "$OUT/s8-baseline.json" --label no-snapshot
  stop_hotrank "$HPID"
  SNAPS=$(awk '/^hotrank_snapshot_seconds_count/ {print $2}' "$OUT/s8-metrics.txt")
  SNAPS_S=$(awk '/^hotrank_snapshot_seconds_sum/ {print $2}' "$OUT/s8-metrics.txt")
  python3 -c "import json; d=json.load(open('$OUT/s8-updates.json')); print('ingest (batches of 100) while %s snapshot(s) took %s s in all: p50 %s us, p99 %s us, max %s us (goal: never waits > 10 ms)' % ('${SNAPS:-0}', '${SNAPS_S:-?}', d['p50_us'], d['p99_us'], d['max_us']))"
  python3 -c "import json; d=json.load(open('$OUT/s8-baseline.json')); print('the same load afterwards, no snapshot: p50 %s us, p99 %s us, max %s us' % (d['p50_us'], d['p99_us'], d['max_us']))"
fi

if want 9; then
  ART=$(n 1000000)
  echo; echo "## 9. model=rising beside gravity: $ART articles with 25 hours of history, 10,000 updates/s"
  HP=$(free_port); start_hotrank "$HP" "$TMP/s9" '[gate]' 'ip_limit_per_minute = 0' 'visitor_limit_per_minute = 0' '[embedded]' 'snapshot_every_records = 1000000000' 'snapshot_interval_secs = 100000' '[limits]' 'queries_per_minute_per_ip = 0'
  # Every article live (one view each), then 20 s of Zipf-distributed views
  # spread over the last 25 hours: a baseline for rising to compare the
  # last hour with.
  bench --target "127.0.0.1:$HP" --preload --articles "$ART" --batch 1000 --connections 4 --duration-secs 900 >/dev/null
  bench --target "127.0.0.1:$HP" --articles "$ART" --zipf 1.0 --visitors 10000000 --spread-secs $((25 * 3600 - 60)) --token bench-ingest-token --batch 1000 --connections 4 --duration-secs 20 >/dev/null
  QUERIES=("gravity:model=gravity&range=24h&limit=20" "rising:model=rising&limit=20" "rising-3h:model=rising&window=3h&limit=20")
  bench --target "127.0.0.1:$HP" --articles "$ART" --zipf 1.0 --visitors 10000000 --batch 100 --connections 2 --rate 10000 --duration-secs $(( ${#QUERIES[@]} * (DUR + 1) + 4 )) --token bench-ingest-token --json "$OUT/s9-updates.json" --label updates >/dev/null &
  UPD=$!
  sleep 2
  curl -s "127.0.0.1:$HP/metrics" > "$OUT/s9-metrics-before.txt"
  for q in "${QUERIES[@]}"; do
    label=${q%%:*}
    curl -s "127.0.0.1:$HP/api/hot?${q#*:}" >/dev/null  # the ranking's index is built before it is timed
    bench --target "127.0.0.1:$HP" --query "/api/hot?${q#*:}" --connections 1 --duration-secs "$DUR" --json "$OUT/s9-$label.json" --label "$label"
  done
  wait "$UPD"
  for q in "${QUERIES[@]}"; do
    label=${q%%:*}
    echo "$label (/api/hot?${q#*:}): p50 $(field "$OUT/s9-$label.json" p50_us) us, p99 $(field "$OUT/s9-$label.json" p99_us) us, $(field "$OUT/s9-$label.json" events_per_sec) queries/s"
  done
  echo "p99 rising / gravity: $(ratio "$(field "$OUT/s9-rising.json" p99_us)" "$(field "$OUT/s9-gravity.json" p99_us)") (goal <= 1000 us each)"
  python3 -c "import json; d=json.load(open('$OUT/s9-updates.json')); print('updates kept at %s events/s; ingest meanwhile (batches of 100): p50 %s us, p99 %s us, max %s us' % (d['events_per_sec'], d['p50_us'], d['p99_us'], d['max_us']))"
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
  curl -s "127.0.0.1:$HP/metrics" > "$OUT/s9-metrics-after.txt"
  echo "server side, from the first query:"
  python3 bench/metrics_window.py "$OUT/s9-metrics-before.txt" "$OUT/s9-metrics-after.txt"
  stop_hotrank "$HPID"
fi
