#!/usr/bin/env bash
# What each part of the Redis ingest costs, in redis-server instructions
# per event (callgrind: they do not depend on the machine's load), beside
# seed 000's script with its dedupe step and two lower bounds
# (bench/floor/*.lua), on the same stream of fresh visitors: batches of
# 250 views over ARTICLES_LIST articles (10,000, as bench/redis_ingest.sh;
# 100, where each article comes 2.5 times a batch, as if batches were
# merged per article before they reach Redis).
# The variants are src/store/redis with one feature taken out each (an
# edit that fails loudly when the code it edits has moved on):
#   current      the store's ingest script as it loads it
#   no-behaviour behaviour limit 0 (no per-visitor article log)
#   no-rate      no visitor rate limit and no behaviour rule
#   no-retry     no batch id (no retry record)
#   no-daily     no daily bucket, daily sketch or daily activity set
#   no-changes   no change log and no archive:dirty
#   no-categories no counted events by category (apply.lua's HGET of the
#                article's category and its stats:cat:h/d HINCRBYs)
#   no-site      none of the site's figures (totals.lua: quarantine by
#                article and crawler, views by minute, the site's hourly
#                visitor sketch)
#   gate-only    no counters at all (apply.lua left out)
#   parse-only   returns once the events are parsed
# Usage: bench/redis_ingest_costs.sh   (env: EVENTS (5000), PORT (6399),
#   ARTICLES_LIST ("10000 100"), VARIANTS (all of the above))
# Needs redis-server, valgrind, python3. About 30 s per variant and count.
set -euo pipefail
cd "$(dirname "$0")/.."
EVENTS=${EVENTS:-5000}
PORT=${PORT:-6399}
ARTICLES_LIST=${ARTICLES_LIST:-"10000 100"}
VARIANTS=${VARIANTS:-"current no-behaviour no-rate no-retry no-daily no-changes no-categories no-site gate-only parse-only"}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
dirs=()
for v in $VARIANTS; do
  mkdir "$TMP/$v"
  cp src/store/redis/*.lua "$TMP/$v/"
  python3 - "$TMP/$v" "$v" <<'PY'
import json, os, sys
d, v = sys.argv[1], sys.argv[2]
def edit(name, old, new):
    p = os.path.join(d, name)
    s = open(p).read()
    if old not in s:
        sys.exit('%s: %s no longer holds %r' % (v, name, old))
    open(p, 'w').write(s.replace(old, new))
def header(over):
    json.dump(over, open(os.path.join(d, 'header.json'), 'w'))
NSTR = ('local NUMSTR = {}\nlocal function nstr(x)\n  local s = NUMSTR[x]\n'
        '  if not s then s = tostring(x); NUMSTR[x] = s end\n  return s\nend\n')
if v == 'no-behaviour':
    header({'12': 0})
elif v == 'no-rate':
    header({'4': 0, '12': 0})
elif v == 'no-retry':
    header({'14': ''})
if v in ('no-daily', 'no-changes'):
    # A call left in place, doing nothing.
    edit('apply.lua', 'local QNAMES', 'local function NOP() end\nlocal QNAMES')
if v == 'no-daily':
    edit('apply.lua', "  view_bucket(A .. 'bucket:d:'", "  NOP(A .. 'bucket:d:'")
    edit('apply.lua', 'for day, set in pairs(act_d) do', 'for day, set in pairs({}) do')
elif v == 'no-changes':
    edit('apply.lua', "      redis.call('ZADD', S .. 'changes', unpack(args))", '')
    edit('apply.lua', "      redis.call('SADD', LK(P, k) .. 'archive:dirty',", "      NOP(LK(P, k) .. 'archive:dirty',")
elif v == 'no-categories':
    edit('apply.lua', "    cat_count(e)\n", '')
elif v == 'no-site':
    edit('totals.lua', "for i, e in ipairs(ev) do\n  local v = verdicts[i]\n  local slot = TSLOT[v]",
         "for i, e in ipairs({}) do\n  local v = verdicts[i]\n  local slot = TSLOT[v]")
elif v == 'gate-only':
    open(os.path.join(d, 'apply.lua'), 'w').write(NSTR)
elif v == 'parse-only':
    edit('ingest.lua', '-- With declared keys (a cluster)',
         'do local o = {} for i = 1, 3 * n do o[i] = 0 end return o end\n-- With declared keys (a cluster)')
elif v not in ('current', 'no-behaviour', 'no-rate', 'no-retry', 'no-site', 'no-categories'):
    sys.exit('unknown variant ' + v)
PY
  dirs+=("$TMP/$v")
done
for a in $ARTICLES_LIST; do
  echo "== $a articles, $EVENTS events, batches of 250 (load $(cut -d' ' -f1 /proc/loadavg))"
  ARTICLES=$a CG=1 python3 bench/redis_script_cost.py "$PORT" "$EVENTS" 1 seed \
    bench/floor/keys.lua bench/floor/fields.lua "${dirs[@]}" 2>&1 |
    grep -E "^run|Error|error" | sed -E "s|$TMP/||; s|bench/floor/|floor/|"
done
