#!/usr/bin/env python3
"""Latency from a `202 queued` answer to the event being visible.

Sends one view at a time for a fresh article and polls
GET /api/articles/{id} every millisecond until its pv is 1; prints p50,
p99 and max in ms. Used by bench/pipeline_ingest.sh (LATENCY=1) while
`hotrank bench` keeps a background load going.
Usage: pipeline_latency.py HOST:PORT SAMPLES
"""
import json
import sys
import time
import urllib.request

host, samples = sys.argv[1], int(sys.argv[2])
ua = {"content-type": "application/json",
      "user-agent": "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0"}
lat = []
for i in range(samples):
    art = f"lat{int(time.time() * 1000)}x{i}"
    body = json.dumps({"articleId": art, "visitorId": f"probe{i}"}).encode()
    req = urllib.request.Request(f"http://{host}/api/views", body, ua)
    with urllib.request.urlopen(req) as r:
        assert r.status == 202, r.status
        t0 = time.monotonic()
    while True:
        try:
            with urllib.request.urlopen(f"http://{host}/api/articles/{art}") as r:
                if json.load(r).get("pv", 0) >= 1:
                    break
        except urllib.error.HTTPError as e:
            if e.code != 404:  # 404 until the filter worker registered it
                sys.exit(f"GET /api/articles/{art}: {e.code} {e.read()[:200]!r}")
        if time.monotonic() - t0 > 30:
            sys.exit(f"{art} not visible after 30 s")
        time.sleep(0.001)
    lat.append((time.monotonic() - t0) * 1000)
lat.sort()
q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]
print(f"latency 202->visible over {len(lat)} views: p50 {q(0.5):.1f} ms, p99 {q(0.99):.1f} ms, max {lat[-1]:.1f} ms")
