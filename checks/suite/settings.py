"""The variables a site may set (`-S name=value`), each with the values it may
take, checked at setup: a bad value is refused before any job script is
written, with a message naming the check, the variable, the value and what
it may be. Without this a value the program refuses (or, worse, accepts: a
count that runs for days) reaches the batch queue and fails after the wait.

Each check declares `settings = {variable: rule}`. The bounds of counts and
durations come from the time the check may take (its `time_limit`): the
largest value of each keeps a run within it at the rates measured, so a
setting that asks for more is refused, not left to the batch system's kill.
"""

from __future__ import annotations

import abc
import math
import re
from dataclasses import dataclass

import reframe as rfm
from reframe.core.builtins import run_after
from reframe.core.exceptions import ReframeError

_SIZE_SHIFT = {"": 0, "K": 10, "M": 20, "G": 30, "T": 40}


class SettingError(ReframeError):
    """A variable set to a value its check cannot run with."""


def size_bytes(text: str) -> int:
    """'16M' -> 16777216: a size as the programs' options read it (src/common
    suite.hpp, parse_bytes): K, M, G, T are powers of 1024, 'KiB' and 'KB'
    alike, and a fraction must come to whole bytes (1.5K, not 0.1K)."""
    found = re.fullmatch(r"(\d+)(?:\.(\d+))?(?:([KMGT])((?-i:i)(?=[Bb]))?)?[Bb]?", str(text).strip(), re.IGNORECASE)
    value = float(f"{found[1]}.{found[2] or 0}") * 2 ** _SIZE_SHIFT[(found[3] or "").upper()] if found else None
    if value is None or value != int(value):
        raise ValueError(f"{text!r} is not a whole number of bytes (K, M, G, T: powers of 1024)")
    return int(value)


def _bytes(n: float) -> str:
    for suffix, shift in (("T", 40), ("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{int(n) >> shift}{suffix}"
    return f"{int(n)}"


class Unreadable(str):
    """A `-S` value its variable's type could not read, kept as text so that
    the variable's rule refuses it at setup, by name. ReFrame's own
    conversion lets the ValueError of int('abc') through and stops with a
    traceback, so the site-settable numbers are declared as
    `variable(Whole, int, Unreadable, ...)`: ReFrame tries Whole first, and
    every later test case that ReFrame hands the value already read takes
    it as it is (without Unreadable among the types, ReFrame drops those
    cases at load, and only the first is refused by name)."""


class Whole(int):
    """An int that reads bad text as Unreadable instead of raising."""

    def __new__(cls, value=0):
        try:
            return super().__new__(cls, value)
        except (TypeError, ValueError):
            return Unreadable(value)


class Decimal(float):
    """A float that reads bad text as Unreadable instead of raising."""

    def __new__(cls, value=0.0):
        try:
            return super().__new__(cls, value)
        except (TypeError, ValueError):
            return Unreadable(value)


class ReadSetting(abc.ABC):  # noqa: B024  (a virtual base: its members are registered, not derived)
    """What a site-settable number's text was read as: a Whole, a Decimal or
    Unreadable. A list variable declares `typ.List[ReadSetting]` among its
    types, as a number declares Unreadable, for the cases after the first."""


for _read in (Whole, Decimal, Unreadable):
    ReadSetting.register(_read)


@dataclass(frozen=True)
class Count:
    """A whole number from `low` to `high`, a multiple of `step`."""

    low: int
    high: int
    step: int = 1

    def what(self) -> str:
        return f"a whole number from {self.low} to {self.high}" + (
            f", a multiple of {self.step}" if self.step > 1 else ""
        )

    def problem(self, value, test) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int) or not self.low <= value <= self.high:
            return self.what()
        if value % self.step:
            return f"a multiple of {self.step} from {self.low} to {self.high}"
        return None


@dataclass(frozen=True)
class Real:
    """A finite number from `low` to `high`."""

    low: float
    high: float

    def what(self) -> str:
        return f"a number from {self.low:g} to {self.high:g}"

    def problem(self, value, test) -> str | None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return self.what()
        if not math.isfinite(value) or not self.low <= value <= self.high:
            return f"a finite number from {self.low:g} to {self.high:g}"
        return None


@dataclass(frozen=True)
class Size:
    """A size in bytes ('256M') from `low` to `high`; `words` is the
    granularity the program needs; `also` other words it takes ('chunk');
    `multiple` the range of multiples of the GPU's memory it takes ('2x')."""

    low: int
    high: int
    words: int = 1
    also: tuple[str, ...] = ()
    multiple: tuple[float, float] | None = None

    def what(self) -> str:
        want = f"a size from {_bytes(self.low)} to {_bytes(self.high)} (K, M, G, T: powers of 1024)"
        want += f", a multiple of {_bytes(self.words)} bytes" if self.words > 1 else ""
        if self.multiple:
            want += f", or a multiple of the GPU's memory from {self.multiple[0]:g}x to {self.multiple[1]:g}x"
        return want + "".join(f", or '{word}'" for word in self.also)

    def problem(self, value, test) -> str | None:
        text = str(value).strip()
        if text in self.also or self._multiple_ok(text):
            return None
        want = self.what()
        try:
            n = size_bytes(text)
        except ValueError:
            return want
        return None if self.low <= n <= self.high and n % self.words == 0 else want

    def _multiple_ok(self, text: str) -> bool:
        found = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)x", text)
        return bool(self.multiple and found and self.multiple[0] <= float(found[1]) <= self.multiple[1])


@dataclass(frozen=True)
class Choice:
    """One of `choices` (compared as text)."""

    choices: tuple

    def what(self) -> str:
        return "one of " + ", ".join(map(str, self.choices))

    def problem(self, value, test) -> str | None:
        return None if str(value) in map(str, self.choices) else self.what()


@dataclass(frozen=True)
class CountOr:
    """A whole number from `low` to `high` (given as text), or one of `words`."""

    low: int
    high: int
    words: tuple[str, ...]

    def problem(self, value, test) -> str | None:
        text = str(value).strip()
        if text in self.words or (text.isdigit() and self.low <= int(text) <= self.high):
            return None
        return self.what()

    def what(self) -> str:
        return f"a whole number from {self.low} to {self.high}" + "".join(f", or '{w}'" for w in self.words)


@dataclass(frozen=True)
class Device:
    """A GPU of the partition's node, by its index (the system's data)."""

    def what(self) -> str:
        return "a GPU of the partition's node, by its index"

    def problem(self, value, test) -> str | None:
        count = test.node["gpus"]["count"]
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < max(count, 1):
            where = test.current_partition.fullname
            return f"a GPU of {where}: {'0' if count <= 1 else f'0 to {count - 1}'} ({count} GPU(s) in its data)"
        return None


@dataclass(frozen=True)
class NumaNode:
    """A NUMA node of the partition's node (the system's data), or None where `optional`."""

    optional: bool = False

    def what(self) -> str:
        return "a NUMA node of the partition's node" + (" (or unset)" if self.optional else "")

    def problem(self, value, test) -> str | None:
        nodes = test.node["numa_nodes"]
        if value is None and self.optional:
            return None
        if isinstance(value, bool) or value not in nodes:
            listed = ", ".join(map(str, nodes))
            return f"a NUMA node of {test.current_partition.fullname}: {listed}" + (
                " (or unset)" if self.optional else ""
            )
        return None


@dataclass(frozen=True)
class Each:
    """A list of at least `least` and at most `most` items, each under `rule`."""

    rule: object
    least: int = 1
    most: int = 64

    def what(self) -> str:
        return f"a list of {self.least} to {self.most} items, each {self.rule.what()}"

    def problem(self, value, test) -> str | None:
        if not isinstance(value, (list, tuple)) or not self.least <= len(value) <= self.most:
            return f"a list of {self.least} to {self.most} items"
        for item in value:
            why = self.rule.problem(item, test)
            if why:
                return f"a list whose every item is {why}; {item!r} is not"
        return None


#: The rules whose range is the same on every node: a value outside it is refused before ReFrame starts.
FIXED_RULES = (Count, Real, Size, Choice, CountOr)


def read_as(rule, text: str):
    """A -S value's text as its rule reads it (a whole number for a Count, a list for Each), or the text
    itself where it does not read (the rule then refuses it)."""
    if isinstance(rule, Each):
        return [read_as(rule.rule, item) for item in text.split(",")]
    number = {Count: Whole, Real: Decimal}.get(type(rule))
    return number(text) if number else text


def fixed_problem(rule, text: str) -> str | None:
    """What a -S value must be where its rule's range is the same on every node (FIXED_RULES, or a list of
    them), else None: the rules of a node's GPUs and NUMA nodes are checked at setup, on the node's data."""
    inner = rule.rule if isinstance(rule, Each) else rule
    if not isinstance(inner, FIXED_RULES):
        return None
    return rule.problem(read_as(rule, text), None)


def rules_of(cls) -> dict:
    """Every variable a site may set on a test class and its rule (a class's own over its bases')."""
    rules = {}
    for klass in reversed(cls.__mro__):
        rules.update(vars(klass).get("settings", {}))
    return rules


def refuse_bad_settings(test) -> None:
    """Raises SettingError naming every variable of `test` whose value its rule refuses."""
    found = []
    for name, rule in rules_of(type(test)).items():
        value = getattr(test, name)
        why = rule.problem(value, test)
        if why:
            found.append(f"{name}={value!r} must be {why}")
    if not found:  # each value in range, what they ask for together
        found = test.settings_problems()
    if found:
        raise SettingError(f"{type(test).variant_name()}: " + "; ".join(found))


class SiteSettings(rfm.RegressionTestPlugin):
    """A test whose site-settable variables are checked at setup: `settings`
    names each one's rule (a class's own add to its bases'), and
    `settings_problems` what they cannot do together."""

    settings: dict = {}

    def settings_problems(self) -> list[str]:
        """What the settings cannot do together (a budget their product
        would pass), one message each; checks with such limits override it."""
        return []

    @run_after("setup")
    def check_settings(self):
        refuse_bad_settings(self)
