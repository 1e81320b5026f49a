"""The record grammar (experiments/records.py), and what is measured is
unchanged by it: every parser reads the committed program outputs
(tests/data) to the same figures as before the grammar, recorded in
tests/data/figures_from_outputs.json."""

import json
import re
from pathlib import Path

import pytest

from experiments.copy_latency import crossovers, parse_block_medians, parse_latencies, parse_skipped, parse_verified
from experiments.daxpy import parse_points
from experiments.mem_scan import parse_link, parse_scan, summarise
from experiments.p2p_pingpong import parse_pingpong_samples
from experiments.records import fields, numbers, records, require
from experiments.um_bandwidth import parse_seed_throughputs

DATA = Path(__file__).parent / "data"
BEFORE = json.loads((DATA / "figures_from_outputs.json").read_text())
MODES, OPS = ("single", "chunked", "multiprocess"), ("read", "write", "atomic")


def _plain(value):
    return json.loads(json.dumps(value, default=list))


def test_fields_run_to_the_next_key_or_the_end():
    assert fields("a=1 b=2,3 reason=gdrdrv is not loaded") == {"a": "1", "b": "2,3", "reason": "gdrdrv is not loaded"}
    # Free text runs to the end of the line, whatever it holds.
    assert fields("method=gdrcopy reason=cuda error code=2") == {"method": "gdrcopy", "reason": "cuda error code=2"}
    with pytest.raises(ValueError, match="size given twice"):
        fields("size=1 size=2")
    # Only DAXPY, printed without the colon before the grammar, goes without it.
    assert records("Latency method=x size=1\n", "Latency") == []
    text = "Scan: x=1\nprose: no fields\nScan: x=2 y=3\nScanner: x=9\n"
    assert records(text, "Scan") == [{"x": "1"}, {"x": "2", "y": "3"}]
    assert records("DAXPY alloc=managed inner=1\n", "DAXPY") == [{"alloc": "managed", "inner": "1"}]
    assert numbers("1.5,2") == (1.5, 2.0) and numbers(None) == ()
    with pytest.raises(ValueError, match="Link record without scan_limit_gbs: 'mode=single'"):
        require({"mode": "single"}, ["mode", "scan_limit_gbs"], "Link")


def test_the_quick_split_of_plain_records_reads_every_record_as_the_grammar_does(monkeypatch):
    """A record the split takes (records._simple_fields) gives what the grammar's expression gives, and one it
    does not take is the expression's: tried over every record of the committed curves, made-up records of
    hard pieces (spaces in values, '=' in values, free text, keys given twice, trailing space), and random
    ones of them."""
    import random

    from experiments import records as grammar

    def by_grammar(text):
        with monkeypatch.context() as m:
            m.setattr(grammar, "_simple_fields", lambda text: None)
            try:
                return fields(text)
            except ValueError as err:
                return str(err)

    def quick(text):
        try:
            return fields(text)
        except ValueError as err:
            return str(err)

    pieces = ["a=1", "b=x y", "c==", "d=", "e=1,2", "reason=r s=t", "a=2", "1x=3", "-k=4", " ", "\t", "z", "é=5"]
    made = [" ".join(random.Random(seed).choices(pieces, k=random.Random(seed).randint(1, 6))) for seed in range(3000)]
    made += ["a=1 ", "a=1\t", "b=2\r", "a=1  b=2", "x", "", "a=1\tb=2", "a=b=c", "k=v reason=", "reason=only"]
    committed = Path(__file__).resolve().parent.parent / "perflogs" / "hopper-vm" / "default"
    for curves in sorted(committed.glob("*.curves")):
        made += [line.split("|", 3)[3].partition(": ")[2] for line in curves.read_text().splitlines()[1:2000]]
    taken = sum(grammar._simple_fields(text) is not None for text in made)
    assert taken > len(made) // 3  # the split is tried, and takes most real records
    for text in made:
        assert quick(text) == by_grammar(text), text


def test_the_reprex_figures_are_unchanged():
    text = (DATA / "um_bandwidth_h100_numa_read.txt").read_text()
    assert parse_seed_throughputs(text) == BEFORE["um_bandwidth"]["throughputs"]


def test_the_daxpy_points_are_unchanged():
    points = parse_points((DATA / "daxpy_h100_managed_off_800000.txt").read_text())
    assert [[p.inner, p.outer, p.sample, p.values] for p in points] == BEFORE["daxpy"]


def test_the_latency_curves_and_crossovers_are_unchanged():
    text, before = (DATA / "copy_latency_h100.txt").read_text(), BEFORE["copy_latency"]
    for statistic in ("median", "min"):
        curves = parse_latencies(text, statistic)
        assert {f"{m} {d} {s}": v for (m, d), c in curves.items() for s, v in c.items()} == before[statistic]
    assert {f"{m} {d} {s}": v for (m, d, s), v in parse_block_medians(text).items()} == before["blocks"]
    assert parse_skipped(text) == before["skipped"] and parse_verified(text) == before["verified"]
    assert crossovers(parse_latencies(text)) == before["crossovers"]


def test_the_scan_points_links_and_summaries_are_unchanged():
    text, before = (DATA / "mem_scan_h200.txt").read_text(), BEFORE["mem_scan"]
    points = parse_scan(text)
    assert _plain([list(p._asdict().values()) for p in points]) == before["points"]
    for mode in MODES:
        for op in OPS:
            link = parse_link(text, mode, op)
            assert _plain(list(link._asdict().values()) if link else None) == before["links"][f"{mode} {op}"]
            case = [p for p in points if p.mode == mode and p.op == op]
            summary = summarise(case, 900.0, link.scan_limit_gbs if link else None)
            assert _plain(summary) == before["summaries"][f"{mode} {op}"]


def test_the_pingpong_samples_are_unchanged():
    text = (DATA / "p2p_pingpong_h200.txt").read_text()
    assert _plain(parse_pingpong_samples(text)) == BEFORE["p2p_pingpong"]


def test_every_program_prints_its_results_as_records():
    """The result lines of every program of src/ are `Tag: key=value` records,
    written by the one record writer (src/common/record.hpp), never by hand."""
    result_tags = {"Scan", "Link", "PingPong", "Latency", "DAXPY", "Run", "Bandwidth", "Skipped"}
    src = Path(__file__).parent.parent / "src"
    sources = "\n".join(p.read_text() for p in src.rglob("*") if p.suffix in (".cu", ".cuh", ".cpp", ".hpp"))
    written = set(re.findall(r'Record(?: \w+)?\("([A-Z][A-Za-z]*)"\)', sources))
    assert result_tags <= written, f"result records: {sorted(written)}"
    by_hand = re.findall(r'printf\(\s*"([A-Z][A-Za-z ]*: \w+=)', sources)
    assert not by_hand, f"records printed without the writer: {by_hand}"


def test_a_jobs_output_is_read_again_once_it_changes(tmp_path):
    from experiments.records import read_output

    out = tmp_path / "rfm_job.out"
    out.write_text("Run: node=0 op=read run=1 gibs=1.0\n")
    assert records(read_output(str(out)), "Run") == [{"node": "0", "op": "read", "run": "1", "gibs": "1.0"}]
    out.write_text("Run: node=0 op=read run=1 gibs=1.0\nRun: node=0 op=read run=2 gibs=2.5\n")
    assert len(records(read_output(str(out)), "Run")) == 2


def test_a_jobs_output_is_parsed_once_for_every_figure_and_again_when_it_changes(tmp_path):
    from experiments.records import parsed_output

    out = tmp_path / "rfm_job.out"
    out.write_text("Run: node=0 op=read run=1 gibs=1.0\n")
    calls = []

    def parse(text, tag):
        calls.append(tag)
        return records(text, tag)

    first = [parsed_output(str(out), parse, "Run") for _ in range(100)]  # a figure each
    assert len(calls) == 1 and all(found is first[0] for found in first)
    out.write_text(out.read_text() + "Run: node=0 op=read run=2 gibs=2.0\n")
    assert len(parsed_output(str(out), parse, "Run")) == 2 and len(calls) == 2
