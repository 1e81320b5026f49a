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


def test_steps_weighed_by_their_work_and_what_comes_after_named():
    """A report's checks differ a hundredfold in records: weighed by records, the time left is the figures';
    the index and histories after them are named, not hidden in it."""
    now = [0.0]
    out = io.StringIO()
    progress = Progress("report", "records", total=1000, every=15, stream=out, clock=lambda: now[0], then="the index")
    for records in (100, 900):
        now[0] += records / 10  # a second per ten records
        progress.step(records)
    assert out.getvalue() == ""  # 10 s, then done: nothing said
    now[0] = 0.0
    progress = Progress("report", "records", 1000, 5, out, lambda: now[0], "the index")
    now[0] += 10
    progress.step(100)
    assert out.getvalue().splitlines() == [
        "report: records 100 of 1000, 10 s so far, about 1 min 30 s left of them (the index)"
    ]
