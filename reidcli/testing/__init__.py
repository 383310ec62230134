"""Generators of small synthetic problems for tests, demos and benchmarks."""
