"""host_bandwidth's sanity on planted outputs: every timed run of every node
and op is a sample of a headline figure, so a missing Run record fails the
check, naming the node and op, instead of a figure left out with a warning."""

import pytest
import reframe.utility.sanity as sn
from checkcase import Case
from reframe.core.exceptions import SanityError

from checks.host_bandwidth import host_bandwidth


def output(nodes=(0, 1), runs=5, drop=None) -> str:
    lines = []
    for node in nodes:
        for op, gibs in (("read", 68.0), ("write", 41.0)):
            lines += [f"Run: node={node} op={op} run={k} gibs={gibs + k / 10:.4f}" for k in range(1, runs + 1)]
            lines.append(f"Bandwidth: node={node} op={op} gibs={gibs + 0.3:.4f} runs={runs}")
    return "\n".join(line for line in lines if line != drop) + "\n"


@pytest.fixture
def case(tmp_path):
    (tmp_path / "err").write_text("")
    return lambda text: Case(
        host_bandwidth, _write(tmp_path / "out", text), tmp_path / "err", node={"numa_nodes": [0, 1]}
    )


def _write(path, text):
    path.write_text(text)
    return path


def test_a_complete_output_passes_and_gives_each_figure_its_runs(case):
    complete = case(output())
    assert sn.evaluate(complete.verified())
    complete.set_perf_variables()
    figures = {name: sn.evaluate(fn) for name, fn in complete.perf_variables.items()}
    assert figures["write_bw_node1"] == 41.3 and figures["write_bw_node1.s5"] == 41.5
    assert len(figures) == 2 * 2 * 6


def test_a_missing_run_record_fails_naming_its_node_and_op(case):
    with pytest.raises(SanityError, match="node 1 write: 4 Run records, 5 expected"):
        sn.evaluate(case(output(drop="Run: node=1 op=write run=3 gibs=41.3000")).verified())


def test_a_missing_node_fails(case):
    with pytest.raises(SanityError):
        sn.evaluate(case(output(nodes=(0,))).verified())
