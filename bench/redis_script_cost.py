#!/usr/bin/env python3
"""Redis-side cost per event of ingest.lua variants, without HTTP or Rust.

Each DIR holds the script's chunks (a copy of src/store/redis/ from any
commit, e.g. `git archive <rev> src/store/redis | tar -x -C /tmp/base`),
assembled in the order of `ingest_script_with` (src/store/redis/mod.rs);
an optional DIR/header.json ({"3": 0, ...}) overrides ingest.lua's
header arguments by index (1-based, as ARGV). Two other kinds of DIR:
`seed` is seed 000's script with its dedupe step, as bench/seed/
seqbench.c runs it (per event `SET dedup:V:A 1 NX EX 900`, then EVALSHA
of seed_view.lua for the new pairs, pipelined 16 deep); a path ending in
`.lua` is a whole script fed batches as ARGV prefix, now, n, then per
event article, visitor bytes, ts, clock (bench/floor/*.lua: the least
work a design with hotrank's gate must do).
One redis-server (started here, on PORT) runs every variant on the same
stream, interleaved (ABAB, then BABA): per run FLUSHALL, a warm-up pass
(WARM=1: articles and buckets exist, the steady state) and the measured
pass of EVENTS views (unique visitors, one hour, trusted) in batches of
BATCH (250), pipelined 4 deep. Prints Redis CPU per event (INFO cpu),
redis.calls per event (INFO commandstats, scripts left out) and, with
CG=1 (redis-server under valgrind --tool=callgrind; slow, use a few
thousand events), redis-server's instructions per event, which do not
depend on the machine's load.

usage: bench/redis_script_cost.py PORT EVENTS RUNS DIR [DIR ...]
(bench/redis_ingest_costs.sh runs it over the current script, variants
of it without one feature each, seed 000's script and bench/floor/.)
env: ARTICLES (10000), BATCH (250), WARM (1), CG (0)
"""
import glob
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

PORT, N, RUNS = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
DIRS = sys.argv[4:]
ARTS = int(os.environ.get('ARTICLES', '10000'))
B = int(os.environ.get('BATCH', '250'))
WARM = os.environ.get('WARM', '1') == '1'
CG = os.environ.get('CG') == '1'
CHUNKS = ['declared.lua', 'epoch.lua', 'ingest_epoch.lua', 'event.lua', 'ingest.lua', 'evicted.lua', 'common.lua', 'gate.lua',
          'apply.lua', 'totals.lua', 'reply.lua']


def assemble(d):
    # As `ingest_script_with` (src/store/redis/mod.rs) does; chunks a tree
    # does not have yet (evicted.lua, totals.lua, the epoch check) are left
    # out.
    chunks = [open(os.path.join(d, p)).read() for p in CHUNKS if os.path.exists(os.path.join(d, p))]
    # Trees with article shards (issue 13): one shard on one Redis, as
    # keys.rs `shard_chunk_tagged(1, None)` puts it after declared.lua;
    # then the direct ingest's `GATE_STAGE = false` (trees with a split
    # ingest read it).
    shard = os.path.join(d, 'shard.lua')
    if os.path.exists(shard):
        chunks.insert(1, 'local NSHARDS = 1\nlocal STAG = nil\n' + open(shard).read()
                      + 'local GATE_STAGE = false\n')
    return ''.join(chunks)


def enc(args):
    out = [b'*%d\r\n' % len(args)]
    for a in args:
        a = a.encode() if isinstance(a, str) else str(a).encode() if isinstance(a, int) else a
        out.append(b'$%d\r\n%s\r\n' % (len(a), a))
    return b''.join(out)


class Conn:
    def __init__(self):
        self.s = socket.create_connection(('127.0.0.1', PORT))
        self.f = self.s.makefile('rb')

    def send(self, *args):
        self.s.sendall(enc(args))

    def read(self):
        line = self.f.readline()
        t, r = line[:1], line[1:-2]
        if t == b'+':
            return r.decode()
        if t == b'-':
            raise RuntimeError(r.decode())
        if t == b':':
            return int(r)
        if t == b'$':
            n = int(r)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if t == b'*':
            return [self.read() for _ in range(int(r))]
        raise RuntimeError('unexpected reply %r' % line)

    def cmd(self, *args):
        self.send(*args)
        return self.read()


def info(c, section):
    return c.cmd('INFO', section).decode().split('\r\n')


def cpu(c):
    return sum(float(l.split(':')[1]) for l in info(c, 'cpu')
               if l.startswith(('used_cpu_user:', 'used_cpu_sys:')))


def calls(c):
    skip = ('cmdstat_eval', 'cmdstat_config', 'cmdstat_info', 'cmdstat_flushall', 'cmdstat_script')
    return sum(int(l.split('calls=')[1].split(',')[0]) for l in info(c, 'commandstats')
               if l.startswith('cmdstat_') and not l.startswith(skip))


def header(now, n, over=None):
    # ingest.lua's ARGV[1..15]: prefix, now, window 900 s, visitor limit 60,
    # no ip limit, eventId TTL 1 d, hourly keep 8 d, daily keep 91 d, no
    # counts, articles need not be known, at most 1,000,000 articles,
    # behaviour limit 30 a minute, quarantine 1 d, a batch id, n.
    h = ['hr:', now, 900, 60, 0, 86400, 8 * 86400, 91 * 86400, 0, 0, 1000000, 30, 86400000,
         '%032x' % random.getrandbits(128), n]
    for i, v in (over or {}).items():
        h[int(i) - 1] = v
    return h


def stream(seed, now):
    rnd = random.Random(seed)
    out = []
    for i in range(N):
        v = rnd.getrandbits(128)
        out.append(['v', '%012d' % rnd.randrange(ARTS), '%032x' % v, v.to_bytes(16, 'little'),
                    '%016x' % 7, now, now * 1000 + i % 1000, now, '', 0, '0', '1'])
    return out


def seed_run(c, sha, now, evs, depth=16):
    # seqbench.c's dedupe mode: the SETs of `depth` events, then the
    # script for those whose pair was new. Returns verdicts as ingest.lua
    # does (0 counted, 1 duplicate), 3 per event.
    out = []
    for s in range(0, len(evs), depth):
        b = [(e[1], e[2]) for e in evs[s:s + depth]]
        for a, v in b:
            c.send('SET', 'dedup:%s:%s' % (v, a), '1', 'NX', 'EX', '900')
        new = [c.read() is not None for _ in b]
        for (a, v), ok in zip(b, new):
            if ok:
                c.send('EVALSHA', sha, 4, 'counter:views:' + a, 'hll:uv:' + a, 'hot:score',
                       'meta:article:' + a, a, v, '1.0', '1.2', '2', '1.5')
        for ok in new:
            if ok:
                c.read()
            out += [0 if ok else 1, 0, 0]
    return out


def run(c, sha, now, evs, depth=4, kind='dir', over=None, epoch=False):
    if kind == 'seed':
        return seed_run(c, sha, now, evs)
    inflight, last = 0, None
    for s in range(0, len(evs), B):
        b = evs[s:s + B]
        if kind == 'lua':
            # article, visitor bytes, ts, clock
            args = ['EVALSHA', sha, 0, 'hr:', now, len(b)]
            for e in b:
                args += [e[1], e[3], e[5], e[6]]
        else:
            # Trees with the epoch check (ingest_epoch.lua) take the epoch
            # key and the epoch first; main() sets the key after FLUSHALL.
            args = ['EVALSHA', sha, 0] + (['hr:pipe:epoch', 'bench'] if epoch else [])
            args += header(now, len(b), over)
            for e in b:
                args += e
        c.send(*args)
        inflight += 1
        if inflight >= depth:
            last = c.read()
            inflight -= 1
    while inflight:
        last = c.read()
        inflight -= 1
    return last


def main():
    try:
        socket.create_connection(('127.0.0.1', PORT)).close()
        sys.exit('port %d is taken (a server from an earlier run still going?)' % PORT)
    except OSError:
        pass
    cgdir = tempfile.mkdtemp(prefix='script_cost_cg.')
    vg = ['valgrind', '--tool=callgrind', '--callgrind-out-file=%s/out.%%p' % cgdir] if CG else []
    srv = subprocess.Popen(vg + ['redis-server', '--port', str(PORT), '--bind', '127.0.0.1',
                                 '--save', '', '--appendonly', 'no'], stdout=subprocess.DEVNULL)
    try:
        for _ in range(600):  # at most 2 minutes (valgrind starts slowly)
            try:
                socket.create_connection(('127.0.0.1', PORT)).close()
                break
            except OSError:
                time.sleep(0.2)
        c = Conn()
        def kind(d):
            return 'seed' if d == 'seed' else 'lua' if d.endswith('.lua') else 'dir'

        def source(d):
            if kind(d) == 'seed':
                here = os.path.dirname(os.path.abspath(__file__))
                seed = os.environ.get('SEED', os.path.join(here, 'seed'))
                return open(os.path.join(seed, 'seed_view.lua')).read()
            return open(d).read() if kind(d) == 'lua' else assemble(d)

        def overrides(d):
            f = os.path.join(d, 'header.json')
            return json.load(open(f)) if kind(d) == 'dir' and os.path.exists(f) else None

        def epoch(d):
            return kind(d) == 'dir' and os.path.exists(os.path.join(d, 'ingest_epoch.lua'))

        shas = [c.cmd('SCRIPT', 'LOAD', source(d)).decode() for d in DIRS]
        us = {d: [] for d in DIRS}
        kins = {d: [] for d in DIRS}
        for r in range(RUNS):
            now = int(time.time())
            evs = stream(r, now)
            order = list(zip(DIRS, shas))
            for d, sha in (order if r % 2 == 0 else order[::-1]):
                c.cmd('FLUSHALL')
                c.cmd('SET', 'hr:pipe:epoch', 'bench')
                if WARM:
                    run(c, sha, now, stream(1000 + r, now), kind=kind(d), over=overrides(d),
                        epoch=epoch(d))
                c.cmd('CONFIG', 'RESETSTAT')
                if CG:
                    subprocess.run(['callgrind_control', '-z', str(srv.pid)], stdout=subprocess.DEVNULL)
                c0 = cpu(c)
                last = run(c, sha, now, evs, kind=kind(d), over=overrides(d), epoch=epoch(d))
                c1 = cpu(c)
                k = calls(c)
                ins = 0
                if CG:
                    before = set(glob.glob(cgdir + '/out.*'))
                    subprocess.run(['callgrind_control', '-d', str(srv.pid)], stdout=subprocess.DEVNULL)
                    for f in sorted(set(glob.glob(cgdir + '/out.*')) - before):
                        for line in open(f):
                            if line.startswith(('summary:', 'totals:')):
                                ins = max(ins, int(line.split()[1]))
                        os.remove(f)
                us[d].append((c1 - c0) * 1e6 / N)
                kins[d].append(ins / N / 1000)
                print('run %d %-30s us/event %.2f  kinstr/event %.1f  calls/event %.2f  verdicts %s  load %s'
                      % (r, d, us[d][-1], kins[d][-1], k / N, sorted(set(last if kind(d) == 'lua' else last[0::3])),
                         open('/proc/loadavg').read().split()[0]), flush=True)
        for d in DIRS:
            v, w = sorted(us[d]), sorted(kins[d])
            print('%-30s median us/event %.2f  kinstr/event %.1f  (us: %s)'
                  % (d, v[len(v) // 2], w[len(w) // 2], ' '.join('%.1f' % x for x in us[d])))
    finally:
        srv.terminate()
        srv.wait(timeout=60)


main()
