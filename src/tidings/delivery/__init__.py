"""Queue delivery: group commit of enqueues, long-poll wake-ups, push streams."""
