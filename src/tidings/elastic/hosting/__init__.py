"""Where the operators run: a deployment in one process (`deployment`), one operator as a
process of its own (`process`), the broker's seam (`seam`), the watch on peers'
connections (`liveness`) and the autoscaler's policy (`autoscaler`)."""
