"""A line (or file) the loader could not use, or a value it names as broken."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Issue:
    """A line (or file) the loader could not use, or a value it names as broken."""

    path: str
    line: int  # 0: the file as a whole
    kind: str  # 'malformed', 'truncated', 'unreadable'; 'not-a-number', 'impossible' (kept, judged broken)
    message: str

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else self.path
        return f"{where}: {self.kind}: {self.message}"
