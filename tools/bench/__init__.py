"""The fix's cost in Dynamo tracing: instructions (callgrind) and Python calls."""
