"""The data pipeline on Spark: the event logs' read side, pure transforms, jobs (match,
replay, report) and the idempotent sink into the subscribers' queues."""
