# Shared by the bench scripts (source it after setting TMP and PIDS=()):
# daemonized throwaway redis-servers and the processes a script started.

# Starts a redis-server on PORT (no persistence), its files under $TMP/PORT,
# and waits until it answers.
bench_redis() { # port
  mkdir -p "$TMP/$1"
  redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize yes --dir "$TMP/$1" --logfile "$TMP/$1/redis.log"
  until redis-cli -p "$1" ping >/dev/null 2>&1; do sleep 0.1; done
}

# Stops the redis-servers on the given ports, discarding their data.
bench_redis_stop() { # port...
  for port in "$@"; do redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; done
}

# Kills and reaps every process in PIDS, then empties it.
bench_stop_all() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  PIDS=()
}
