# Shared by the bench scripts (source it after setting TMP and PIDS=()):
# daemonized throwaway redis-servers and the processes a script started.

# A free loopback TCP port.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Starts a redis-server on PORT (no persistence), its files under $TMP/PORT,
# with any further arguments, and waits until it answers.
bench_redis() { # port [redis-server arguments...]
  local port=$1
  shift
  mkdir -p "$TMP/$port"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
    --daemonize yes --dir "$TMP/$port" --logfile "$TMP/$port/redis.log" "$@"
  until redis-cli -p "$port" ping >/dev/null 2>&1; do sleep 0.1; done
}

# Starts a Redis Cluster of the given free ports (one primary each, no
# replicas; each node's bus on another free port) and waits until it is
# ok.
bench_cluster() { # port...
  local p
  for p in "$@"; do
    bench_redis "$p" --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-port "$(free_port)"
  done
  redis-cli --cluster create $(for p in "$@"; do printf '127.0.0.1:%s ' "$p"; done) \
    --cluster-yes >/dev/null
  until redis-cli -p "$1" cluster info | grep -q 'cluster_state:ok'; do sleep 0.1; done
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
