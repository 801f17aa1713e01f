-- nicbench's done() hook for wrk: the run's totals as one JSON line between
-- markers, so nothing is scraped from wrk's human text.  Units: duration and
-- latency in microseconds, bytes as wrk counts them (headers and bodies of
-- every response read, partial bodies of a run cut at its end included).

done = function(summary, latency, requests)
  local e = summary.errors
  local p = {}
  for _, q in ipairs({50, 90, 99, 99.9}) do
    p[#p + 1] = string.format('"%s": %d', tostring(q), latency:percentile(q))
  end
  io.write("nicbench-wrk-begin\n")
  io.write(string.format(
    '{"duration_us": %d, "requests": %d, "bytes": %d, ' ..
    '"errors": {"connect": %d, "read": %d, "write": %d, "status": %d, "timeout": %d}, ' ..
    '"latency_us": {"min": %d, "max": %d, "mean": %.1f, "stdev": %.1f, "percentiles": {%s}}}\n',
    summary.duration, summary.requests, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency.min, latency.max, latency.mean, latency.stdev, table.concat(p, ", ")))
  io.write("nicbench-wrk-end\n")
end
