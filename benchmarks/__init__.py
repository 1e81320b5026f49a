"""Benchmarks of the suite's own code at a centre's scale (not tests: they measure, they do not judge).

python -m benchmarks.history --help
"""
