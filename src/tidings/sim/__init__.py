"""The simulator, the thesis's correctness scenarios and its end-to-end experiments."""
