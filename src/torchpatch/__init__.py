"""Apply, verify and revert a Dynamo patch series on an installed torch."""

__version__ = "0.1.0"
