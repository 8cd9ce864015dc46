#!/usr/bin/env bash
# Schemathesis against a live `hotrank serve`: every operation of
# /openapi.json, all checks, the stateful phase included, a fixed seed and a
# bounded number of examples. Runnable alone: `.ci/schemathesis.sh`.
# Environment: ST_SEED (default 20251121), ST_EXAMPLES (per operation,
# default 100), ST_VENV (where Schemathesis is installed).
set -euo pipefail
cd "$(dirname "$0")/.."

seed="${ST_SEED:-20251121}"
examples="${ST_EXAMPLES:-100}"
target="${CARGO_TARGET_DIR:-target}"
venv="${ST_VENV:-$target/schemathesis-venv}"
if ! "$venv/bin/st" --version 2>/dev/null | grep -q "4.32.5"; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q -r .ci/schemathesis-requirements.txt
fi

cargo build --quiet --bin hotrank
data="$(mktemp -d)"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
# Budgets have their own tests (tests/abuse.rs); here they would turn most
# requests into 429s and leave the logic behind them untested. Down-votes
# are on so that every value the document allows is accepted.
cat > "$data/hotrank.toml" <<TOML
listen = "127.0.0.1:$port"
data_dir = "$data"
[limits]
queries_per_minute_per_ip = 0
posts_per_minute_per_user = 0
votes_per_minute_per_user = 0
[models.votes]
allow_down_votes = true
TOML
export HOTRANK_ADMIN_TOKEN=schemathesis-admin-token
export HOTRANK_INGEST_TOKEN=schemathesis-ingest-token
"$target/debug/hotrank" serve --config "$data/hotrank.toml" >"$data/server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; rm -rf "$data"' EXIT
python3 - "$port" <<'PY'
import sys, time, urllib.request
for _ in range(200):
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/healthz", timeout=1)
        break
    except OSError:
        time.sleep(0.1)
else:
    sys.exit("hotrank did not come up")
PY

# /api/stream answers an endless event stream, which a tool that reads
# each body whole cannot check; tests/feeds.rs reads it as a client does.
# Schemathesis keeps a cache in its working directory: run it in the target dir.
hooks="$PWD/.ci/schemathesis_hooks.py"
st="$(cd "$venv" && pwd)/bin/st"
mkdir -p "$target"
cd "$target"
SCHEMATHESIS_HOOKS="$hooks" "$st" run \
  "http://127.0.0.1:$port/openapi.json" \
  --checks all \
  --phases examples,coverage,fuzzing,stateful \
  --header "Authorization: Bearer $HOTRANK_ADMIN_TOKEN" \
  --seed "$seed" \
  --max-examples "$examples" \
  --workers 1 \
  --report junit --report-dir schemathesis-report \
  --exclude-path /api/stream \
  "$@"
