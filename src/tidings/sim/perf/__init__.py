"""`tidings perf`: a PerfTest-style load tool with one adapter per broker."""
