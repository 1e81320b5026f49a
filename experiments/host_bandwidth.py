"""host_bandwidth: what its program prints and what it means (parsing and
derivations), free of ReFrame; checks/host_bandwidth.py runs it, reports/ draw it."""

from __future__ import annotations

NAME = "host_bandwidth"

OPS = ("read", "write")


# ------------------------------------------------------------ in the report --

NOTE = "bandwidth of each NUMA node's memory from threads bound to it."
