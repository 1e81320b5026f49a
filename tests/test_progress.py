"""Progress lines: none for a short loop, then at most one per period, with the time left at the pace so far."""

import io

from experiments.progress import Progress


def test_progress_is_said_once_a_period_with_the_time_left():
    now = [0.0]
    out = io.StringIO()
    progress = Progress("power", "nights", total=10, every=15, stream=out, clock=lambda: now[0])
    for _ in range(10):
        now[0] += 10  # ten seconds a step
        progress.step()
    lines = out.getvalue().splitlines()
    assert lines[0] == "power: nights 2 of 10, 20 s so far, about 1 min 20 s left"
    assert len(lines) == 4  # at 20, 40, 60 and 80 s; none once done


def test_a_loop_shorter_than_the_period_says_nothing():
    out = io.StringIO()
    progress = Progress("compare", "paths", total=3, stream=out)
    for _ in range(3):
        progress.step()
    assert out.getvalue() == ""
