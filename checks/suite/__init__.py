"""Shared pieces of the suite's checks: the build fixture and base classes."""
