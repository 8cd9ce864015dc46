#!/usr/bin/env python3
"""Redis-side cost per event of ingest.lua variants, without HTTP or Rust.

Each DIR holds the script's chunks (a copy of src/store/redis/ from any
commit, e.g. `git archive <rev> src/store/redis | tar -x -C /tmp/base`),
assembled in the order of `ingest_script_with` (src/store/redis/mod.rs).
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
env: ARTICLES (10000), BATCH (250), WARM (1), CG (0)
"""
import glob
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
CHUNKS = ['declared.lua', 'event.lua', 'ingest.lua', 'evicted.lua', 'common.lua', 'gate.lua',
          'apply.lua', 'totals.lua', 'reply.lua']


def assemble(d):
    # As `ingest_script_with` (src/store/redis/mod.rs) does; chunks a tree
    # does not have yet (evicted.lua, totals.lua) are left out.
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


def header(now, n):
    # ingest.lua's ARGV[1..15]: prefix, now, window 900 s, visitor limit 60,
    # no ip limit, eventId TTL 1 d, hourly keep 8 d, daily keep 91 d, no
    # counts, articles need not be known, at most 1,000,000 articles,
    # behaviour limit 30 a minute, quarantine 1 d, a batch id, n.
    return ['hr:', now, 900, 60, 0, 86400, 8 * 86400, 91 * 86400, 0, 0, 1000000, 30, 86400000,
            '%032x' % random.getrandbits(128), n]


def stream(seed, now):
    rnd = random.Random(seed)
    out = []
    for i in range(N):
        v = rnd.getrandbits(128)
        out.append(['v', '%012d' % rnd.randrange(ARTS), '%032x' % v, v.to_bytes(16, 'little'),
                    '%016x' % 7, now, now * 1000 + i % 1000, now, '', 0, '0', '1'])
    return out


def run(c, sha, now, evs, depth=4):
    inflight, last = 0, None
    for s in range(0, len(evs), B):
        b = evs[s:s + B]
        args = ['EVALSHA', sha, 0] + header(now, len(b))
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
        shas = [c.cmd('SCRIPT', 'LOAD', assemble(d)).decode() for d in DIRS]
        us = {d: [] for d in DIRS}
        kins = {d: [] for d in DIRS}
        for r in range(RUNS):
            now = int(time.time())
            evs = stream(r, now)
            order = list(zip(DIRS, shas))
            for d, sha in (order if r % 2 == 0 else order[::-1]):
                c.cmd('FLUSHALL')
                if WARM:
                    run(c, sha, now, stream(1000 + r, now))
                c.cmd('CONFIG', 'RESETSTAT')
                if CG:
                    subprocess.run(['callgrind_control', '-z', str(srv.pid)], stdout=subprocess.DEVNULL)
                c0 = cpu(c)
                last = run(c, sha, now, evs)
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
                      % (r, d, us[d][-1], kins[d][-1], k / N, sorted(set(last[0::3])),
                         open('/proc/loadavg').read().split()[0]), flush=True)
        for d in DIRS:
            v, w = sorted(us[d]), sorted(kins[d])
            print('%-30s median us/event %.2f  kinstr/event %.1f  (us: %s)'
                  % (d, v[len(v) // 2], w[len(w) // 2], ' '.join('%.1f' % x for x in us[d])))
    finally:
        srv.terminate()
        srv.wait(timeout=60)


main()
