"""The names records carry: a test's display name split into its name and
parameters, and the checks' former names, read as today's."""

from __future__ import annotations

import re

_PARAM = re.compile(r"%(?P<name>[\w.]+)=(?P<value>\S+)")


def split_display_name(display_name: str) -> tuple[str, dict[str, str]]:
    """'Check %a=1 %b=x ~fixture' -> ('Check', {'a': '1', 'b': 'x'})."""
    text = display_name or ""
    test = text.split(" ", 1)[0]
    return test, {m["name"]: m["value"] for m in _PARAM.finditer(text)}


#: The checks' names before every experiment had one name, as the records of
#: earlier runs carry them: read as today's, so that their figures are the
#: baselines of today's runs.
FORMER_NAMES = {
    "UnifiedMemoryBandwidth": "um_bandwidth",
    "DaxpyStudy": "daxpy",
    "HostMemoryBandwidth": "host_bandwidth",
    "SmallCopyLatency": "copy_latency",
    "RandomAccessScan": "mem_scan",
    "P2PPingPong": "p2p_pingpong",
    "NodeHealth": "node_health",
    "GdrCopySanity": "gdrcopy_sanity",
    "GdrCopyBandwidth": "gdrcopy_copybw",
    "GdrCopyLatency": "gdrcopy_copylat",
    "GdrCopyApiPerf": "gdrcopy_apiperf",
}
