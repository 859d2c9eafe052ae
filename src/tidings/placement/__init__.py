"""MultiPub topic placement: which cloud regions serve a topic, direct or routed.

`model` states the paper's equations, `spec` evaluates them literally (the reference), `solver`
finds the same answer fast. All three are pure: no I/O.
"""
