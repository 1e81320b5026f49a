"""The suite's record grammar, and its one parser.

Every program of src/ prints its results as records, one a line::

    Tag: key=value key=value ...

a capitalised tag, a colon, then fields; a value runs to the next
`` key=`` or the end of the line (lists are comma-separated). A free-text
field (``reason``) is the last of its record and runs to the end of the
line, whatever it holds. A key given twice is an error. Lines of other
shapes are the programs' prose (what they set up, what they verified) and
are not records. DAXPY lines printed before the colon became part of the
grammar (``DAXPY alloc=...``) read alike; no other tag goes without it.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

_FIELD = re.compile(r"(\w+)=(.*?)(?= \w+=|\s*$)")

#: Fields whose value is free text: the last of a record, to the end of the line.
FREE_TEXT = ("reason",)

#: Tags once printed without the colon (outputs from before the grammar).
_WITHOUT_COLON = ("DAXPY",)


def _line(tag: str) -> re.Pattern:
    colon = ":?" if tag in _WITHOUT_COLON else ":"
    return re.compile(rf"^{re.escape(tag)}{colon} (?=\w+=)(?P<fields>.*)$", re.MULTILINE)


def fields(text: str) -> dict[str, str]:
    """'a=1 b=x y reason=r s=t' -> {'a': '1', 'b': 'x y', 'reason': 'r s=t'}."""
    simple = _simple_fields(text)
    if simple is not None:
        return simple
    free = re.search(rf"(?:^| )({'|'.join(FREE_TEXT)})=(.*)$", text)
    head = text[: free.start()] if free else text
    found: dict[str, str] = {}
    for key, value in _FIELD.findall(head):
        if key in found:
            raise ValueError(f"{key} given twice in the record {text!r}")
        found[key] = value
    if free:
        found[free[1]] = free[2].strip()
    return found


def _simple_fields(text: str) -> dict[str, str] | None:
    """`fields` of a record whose every space starts a field (key=value, a key of word characters, given
    once) and that has no free text and no trailing space: a split, where the grammar's expression costs
    ten times as much (a partition's night reads millions of curve records); None for any other record."""
    if any(f"{name}=" in text for name in FREE_TEXT) or text[-1:].isspace():
        return None
    pairs = [part.partition("=") for part in text.split(" ")]
    if not all(sep and key.isascii() and key.isidentifier() for key, sep, _ in pairs):
        return None
    found = {key: value for key, _, value in pairs}
    return found if len(found) == len(pairs) else None


def records(text: str, tag: str) -> list[dict[str, str]]:
    """The fields of every `tag` record of a program's output, in order."""
    return [fields(m["fields"]) for m in _line(tag).finditer(text)]


def numbers(value: str | None) -> tuple:
    """A comma-separated list of numbers ('1.5,2,3'); () where absent."""
    return tuple(float(x) for x in value.split(",")) if value else ()


def require(record: dict, names: list, tag: str) -> dict:
    """`record`, or an error naming the fields a `tag` record lacks."""
    missing = [n for n in names if n not in record]
    if missing:
        shown = " ".join(f"{k}={v}" for k, v in record.items())
        raise ValueError(f"{tag} record without {', '.join(missing)}: {shown!r}")
    return record


def read_output(path: str) -> str:
    """A job's output, read once however many deferred figures parse it (a
    scan case has over a hundred): the cache is keyed by the file's size and
    modification time, so a file written again is read again."""
    stat = os.stat(path)
    return _read(os.path.abspath(path), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=8)
def _read(path: str, size: int, mtime_ns: int) -> str:
    with open(path) as stream:
        return stream.read()


def parsed_output(path: str, parser, *args):
    """`parser(output, *args)` of a job's output, parsed once however many
    deferred figures read it (a path matrix of eight GPUs has hundreds, each
    of which parsed the whole output again), keyed as read_output's; what it
    returns is shared by every caller: read it, never change it."""
    stat = os.stat(path)
    return _parsed(os.path.abspath(path), stat.st_size, stat.st_mtime_ns, parser, args)


@lru_cache(maxsize=16)
def _parsed(path: str, size: int, mtime_ns: int, parser, args: tuple):
    return parser(_read(path, size, mtime_ns), *args)
