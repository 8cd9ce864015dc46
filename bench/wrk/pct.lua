-- Prints latency percentiles in microseconds.
done = function(summary, latency, requests)
  io.write(string.format("p50_us=%d p90_us=%d p99_us=%d max_us=%d req_per_s=%.0f\n",
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    summary.requests / (summary.duration / 1e6)))
end
