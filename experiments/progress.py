"""How far a command of minutes has got, and about how long it has left: one
line on stderr at most every `every` seconds, so that a terminal and a cron
log both read it (no carriage returns).

    progress = Progress("power", "simulated nights", total=200)
    for night in nights:
        ...
        progress.step()
"""

from __future__ import annotations

import sys
import time

from experiments.budget import minutes


class Progress:
    """Steps done of `total`, said now and then with the time left at the pace so far."""

    def __init__(
        self, who: str, what: str, total: int, every: float = 15.0, stream=None, clock=time.monotonic, then: str = ""
    ):
        self.who, self.what, self.total, self.every = who, what, total, every
        #: What the command does after these steps, which the time left does not count (said with it).
        self.then = then
        self.stream, self.clock = stream, clock
        self.done = 0
        self.began = self.said = clock()

    def step(self, n: int = 1) -> None:
        self.done += n
        now = self.clock()
        if now - self.said >= self.every and self.done < self.total:
            self.said = now
            left = (now - self.began) / self.done * (self.total - self.done)
            print(
                f"{self.who}: {self.what} {self.done} of {self.total}, {minutes(now - self.began)} so far, "
                f"about {minutes(left)} left" + (f" of them ({self.then})" if self.then else ""),
                file=self.stream or sys.stderr,
                flush=True,
            )
