"""Implementations of the core's ports: in memory (tests) and on AWS (the functions)."""
