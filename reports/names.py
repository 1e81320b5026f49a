"""The names records carry: a test's display name split into its name and
parameters."""

from __future__ import annotations

import re

_PARAM = re.compile(r"%(?P<name>[\w.]+)=(?P<value>\S+)")


def split_display_name(display_name: str) -> tuple[str, dict[str, str]]:
    """'Check %a=1 %b=x ~fixture' -> ('Check', {'a': '1', 'b': 'x'})."""
    text = display_name or ""
    test = text.split(" ", 1)[0]
    return test, {m["name"]: m["value"] for m in _PARAM.finditer(text)}
