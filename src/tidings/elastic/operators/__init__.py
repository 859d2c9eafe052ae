"""The operators: access points, matchers and exit points, each an inbox loop over the
messages of `protocol.wire`, and the base they share (`operator.Operator`)."""
