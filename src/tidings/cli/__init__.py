"""The `tidings` command: serve, publish, subscribe, queue, sim, scenarios, perf, cost, pipeline."""
