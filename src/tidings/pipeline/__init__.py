"""The data pipeline on Spark: the event logs' read side, pure transforms, jobs (match,
replay, report) and the idempotent sink into the subscribers' queues."""

# A batch of at most this many lines is matched in the driver by default (`jobs.Matching`).
DRIVER_LINES = 2000
