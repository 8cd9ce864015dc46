#!/usr/bin/env python3
"""What the server itself saw between two scrapes of /metrics.

    bench/metrics_window.py BEFORE.txt AFTER.txt

Prints, for the window between the scrapes: the state lock's holds per
holder (hotrank_lock_hold_seconds), the server-side duration of
`GET /api/hot` and of ingest calls (bucket bounds for p50/p99/max, the
share over 1 ms and 10 ms), and the ranking builds counted. Server-side
durations exclude the client's and the scheduler's time before the
request is read, so comparing them with the load generator's figures
tells server work from CPU starvation.
"""
import re
import sys

LINE = re.compile(r'^(\w+)(?:\{(.*)\})? (\S+)$')


def read(path):
    out = {}
    for line in open(path):
        m = LINE.match(line.strip())
        if not m:
            continue
        labels = tuple(sorted(re.findall(r'(\w+)="([^"]*)"', m.group(2) or '')))
        out[(m.group(1), labels)] = float(m.group(3))
    return out


def window(before, after):
    return {k: v - before.get(k, 0.0) for k, v in after.items()}


def histograms(d, name, by):
    """{label value of `by`: sorted [(le, cumulative count)]}"""
    hs = {}
    for (metric, labels), v in d.items():
        if metric != name + '_bucket':
            continue
        lab = dict(labels)
        le = float('inf') if lab['le'] == '+Inf' else float(lab['le'])
        hs.setdefault(lab.get(by), []).append((le, v))
    return {k: sorted(v) for k, v in hs.items()}


def quantile(buckets, q):
    total = buckets[-1][1] if buckets else 0
    for le, c in buckets:
        if c >= q * total:
            return le
    return float('inf')


def over(buckets, bound):
    total = buckets[-1][1] if buckets else 0
    under = max((c for le, c in buckets if le <= bound), default=0)
    return total - under


def fmt(s):
    return '+Inf' if s == float('inf') else f'{s * 1000:g} ms'


def describe(label, b):
    n = int(b[-1][1]) if b else 0
    if n == 0:
        return
    print(f'{label}: {n} calls, p50 <= {fmt(quantile(b, 0.5))}, p99 <= {fmt(quantile(b, 0.99))}, '
          f'max <= {fmt(quantile(b, 1.0))}; over 1 ms: {int(over(b, 0.001))}, over 10 ms: {int(over(b, 0.01))}')


def main():
    d = window(read(sys.argv[1]), read(sys.argv[2]))
    for what, b in sorted(histograms(d, 'hotrank_lock_hold_seconds', 'what').items()):
        describe(f'state lock held by {what}', b)
    for route, b in sorted(histograms(d, 'hotrank_http_request_seconds', 'route').items()):
        if route in ('/api/hot', '/api/events'):
            describe(f'server-side {route}', b)
    for endpoint, b in sorted(histograms(d, 'hotrank_query_seconds', 'endpoint').items()):
        describe(f'server-side store query ({endpoint})', b)
    for endpoint, b in sorted(histograms(d, 'hotrank_ingest_seconds', 'endpoint').items()):
        describe(f'server-side store ingest ({endpoint})', b)
    describe('log fsync (hotrank_wal_fsync_seconds)',
             histograms(d, 'hotrank_wal_fsync_seconds', None).get(None, []))
    describe('server-side ranking walk (hotrank_ranking_seconds)',
             histograms(d, 'hotrank_ranking_seconds', None).get(None, []))
    builds = sum(v for (m, _), v in d.items() if m == 'hotrank_ranking_rebuilds_total')
    print(f'ranking builds finished: {int(builds)}')


main()
