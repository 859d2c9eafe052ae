"""Where the operators run: a deployment in one process (`deployment`), its recovery of
lost members (`recovery`) and its watch on the other processes' operators (`evictions`, over
`liveness`), one operator as a process of its own (`process`), the broker's seam (`seam`),
and the autoscaler's policy (`autoscaler`)."""
