"""The judge's test bench: committed nights replayed through the nightly's own code.

A replayed night is perflog text. Each path's lines are those one committed
clean night of the kind logged (a path-wise bootstrap over the nights: a
path keeps its night's transients and its figures their correlation), with
a fault planted on one path where asked. The text is written to perflog
files, read back by reports/load.py and judged by the nightly's
`judge_window` against the accepted runs; a flagged path is confirmed by
`verdict.confirm` against its rerun, as the nightly confirms: the path's own
committed rerun where its night had one, else the path drawn again from
another night, the fault planted again (a fault lasts, noise need not). The
exit status is the nightly's `nightly_status` of what that leaves. No model
stands between the nights and the verdict; the later measure a shared host
adds (`confirm_later_s`) is not replayed, so the bench is harsher than the
nightly there.
"""

from __future__ import annotations

import copy
import json
import math
import tempfile
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd

from judge import partition, verdict
from judge.select import accepted_masks, run_rows
from reports.load import from_perflogs, load
from reports.runs import NIGHTLY_DIR, PERFLOGS, nights_outside, now, read_accepted
from runner import nightly
from runner import partition as runner_partition
from runner.upgrade import UPGRADES

#: Where replayed nights are stamped: after any committed one.
REPLAY_EPOCH = pd.Timestamp("2099-01-01T00:00:00", tz="UTC")


@dataclass(frozen=True)
class Fault:
    """What is planted on one path of a replayed night (nothing without a path)."""

    path: str | None = None
    move: float = 0.0  # worse by this fraction: a rate falls, a time rises
    spread: float = 1.0  # each sample's log deviation from its figure's median, times this
    nan: bool = False  # each of the path's figures has its first sample 'nan'


@dataclass
class Replayed:
    """A replayed night: its first judgement, the rerun's (None where nothing
    was flagged), the confirmed verdict and the exit status."""

    first: nightly.Judgement
    rerun: nightly.Judgement | None
    final: verdict.Verdict
    exit: int

    def flagged(self) -> list[str]:
        """The paths the night exits 2 on: moved or unstable, confirmed."""
        return self.final.flagged_paths()

    def not_rerun(self) -> list[str]:
        """The flagged paths no rerun measured (a committed night's rerun ran the cases its own verdict
        flagged then): they stand unconfirmed, where a night run today would rerun them."""
        if self.rerun is None or self.rerun.verdict is None:
            return self.flagged()
        paths = self.rerun.verdict.paths
        measured = set(paths.loc[paths["verdict"] != "unjudged", "path"])  # judge lists every accepted path
        return [path for path in self.flagged() if path not in measured]


class Bench:
    """The committed nights of one kind of node (but those left out), ready to be replayed."""

    def __init__(
        self,
        system: str,
        kind: str,
        alpha: float = 0.05,
        leave_out: tuple[str, ...] = (),
        rules: verdict.Rules = verdict.ALL_RULES,
    ):
        self.system, self.kind, self.alpha, self.rules = system, kind, alpha, rules
        self.accepted = read_accepted(system, kind)
        if self.accepted is None:
            raise ValueError(f"no accepted runs of {system} on {kind}")
        frame = load([PERFLOGS / system], warn=None).frame
        frame = frame[from_perflogs(frame)]
        self.base = frame[run_rows(frame, system, self.accepted["runs"])]
        # What every replayed night is judged against, made once as the nightly makes it.
        self.base_values = nightly.accepted_values(self.base, system, self.accepted)
        self.pool = nightly.others_pool(frame, system, self.accepted)  # every kind's runs, not this one's alone
        self.nights, self.reruns = {}, {}
        for run in nights_outside(system, self.accepted, leave_out):
            self.nights[run["stamp"]] = _with_paths(frame[run_rows(frame, system, [run])])
            if run.get("rerun"):
                self.reruns[run["stamp"]] = _with_paths(frame[run_rows(frame, system, [run["rerun"]])])
        if not self.nights:
            raise ValueError(f"no committed night of {system} on {kind} outside its accepted runs")
        # Each night's lines by path, split once: a replayed night draws every path from one of them.
        self._lines = {stamp: dict(tuple(n.groupby("path", sort=False))) for stamp, n in self.nights.items()}
        self.paths = sorted(set().union(*(set(n) for n in self._lines.values())) - {""})
        self._file_lines = _line_reader()
        self._count = 0

    def night(self, rng: np.random.Generator, fault: Fault = Fault()) -> Replayed:
        """One replayed night, its rerun where something is flagged, judged as the nightly judges."""
        drawn = self._draw(rng)
        return self._replayed(self._rows(drawn), fault, lambda flagged: self._rerun_rows(rng, drawn, flagged))

    def committed(self, stamp: str, fault: Fault = Fault()) -> Replayed:
        """A committed night replayed whole (every path from it), confirmed by
        its own committed rerun where it had one and by nothing where it had
        none (a flag then stands, unconfirmed, as a night without a rerun)."""
        own = self.reruns.get(stamp)
        rerun = None if own is None else (lambda flagged: own[own["path"].isin(flagged)])
        return self._replayed(self._rows(dict.fromkeys(["", *self.paths], stamp)), fault, rerun)

    def _replayed(self, rows: pd.DataFrame, fault: Fault, rerun_rows) -> Replayed:
        """`rows` judged, then what it flags confirmed against `rerun_rows(flagged)` (None: no rerun)."""
        first = self._judge(rows, fault)
        flagged = first.flagged_paths()
        if not flagged or rerun_rows is None:
            return Replayed(first, None, first.verdict, self._status(first.verdict))
        rerun = self._judge(rerun_rows(flagged), fault)
        final = verdict.confirm(first.verdict, rerun.verdict)
        return Replayed(first, rerun, final, self._status(final))

    # --- drawing a night ---------------------------------------------------

    def _draw(self, rng: np.random.Generator) -> dict[str, str]:
        """The night each path's lines come from ('' : the lines no path judges)."""
        stamps = list(self.nights)
        drawn = {"": stamps[rng.integers(len(stamps))]}
        for path in self.paths:
            having = [s for s in stamps if path in self._lines[s]]
            drawn[path] = having[rng.integers(len(having))]
        return drawn

    def _rows(self, drawn: dict[str, str]) -> pd.DataFrame:
        parts = [self._lines[stamp].get(path, self.nights[stamp].iloc[:0]) for path, stamp in drawn.items()]
        return pd.concat(parts, ignore_index=True)

    def _rerun_rows(self, rng: np.random.Generator, drawn: dict[str, str], flagged: list[str]) -> pd.DataFrame:
        """The flagged paths' lines again: their night's committed rerun, else another night's."""
        parts = []
        for path in flagged:
            own = self.reruns.get(drawn[path])
            if own is not None and (own["path"] == path).any():
                parts.append(own[own["path"] == path])
                continue
            others = [s for s in self.nights if s != drawn[path] and path in self._lines[s]]
            stamp = others[rng.integers(len(others))] if others else drawn[path]
            parts.append(self._lines[stamp].get(path, self.nights[stamp].iloc[:0]))
        return pd.concat(parts, ignore_index=True)

    # --- writing, reading back, judging ---------------------------------------

    def _judge(self, rows: pd.DataFrame, fault: Fault) -> nightly.Judgement:
        self._count += 1
        start = REPLAY_EPOCH + pd.Timedelta(hours=self._count)
        frame = read_back(self._perflogs(rows, fault, start))
        window = {"start": start.isoformat(), "end": (start + pd.Timedelta(seconds=1)).isoformat()}
        return nightly.judge_window(
            frame, self.system, self.accepted, window, self.alpha, self.base_values, self.pool, self.rules
        )

    def _perflogs(self, rows: pd.DataFrame, fault: Fault, start: pd.Timestamp) -> dict[str, str]:
        """{file name: perflog text}: each row's committed line, stamped `start`, the fault planted."""
        return perflog_texts(rows, _planted(rows, fault), pd.Series(start, index=rows.index), self._file_lines)

    def _status(self, result: verdict.Verdict) -> int:
        return nightly.nightly_status({"failed": []}, result, [], False)


def _line_reader():
    """A reader of committed perflog files' lines, each file read once (per bench)."""

    @cache
    def lines(source: str) -> list[str]:
        return Path(source).read_text().splitlines()

    return lines


def read_back(texts: dict[str, str]) -> pd.DataFrame:
    """Perflog texts ({file name: text}) written to files and read back by the loader."""
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in texts.items():
            (Path(tmp) / name).write_text(text)
        return load(tmp, warn=None).frame


def perflog_texts(rows: pd.DataFrame, values: pd.Series, stamps: pd.Series, file_lines, environ=None) -> dict[str, str]:
    """{file name: perflog text}: each row's committed line (`file_lines(source)`)
    with its time, value and, where given, environment replaced."""
    texts = {}
    for source, group in rows.groupby("source"):
        header, *_ = lines = file_lines(source)
        fields = header.split("|")
        at, env_at = fields.index("perf_value"), fields.index("environ")
        out = [header]
        for index, line in zip(group.index, group["line"]):
            parts = lines[int(line) - 1].split("|")
            parts[0] = stamps[index].isoformat()
            parts[at] = "nan" if pd.isna(values[index]) else f"{values[index]:.9g}"
            if environ is not None:
                parts[env_at] = environ
            out.append("|".join(parts))
        texts[Path(source).name] = "\n".join(out) + "\n"
    return texts


def _with_paths(rows: pd.DataFrame) -> pd.DataFrame:
    """The rows with the verdict's path of each figure (verdict.attach_paths):
    '' for none, and for a yardstick, which goes with the lines no path judges."""
    rows = verdict.attach_paths(rows)
    return rows.assign(path=rows["path"].where(rows["yardstick"] == "", ""))


def _planted(rows: pd.DataFrame, fault: Fault) -> pd.Series:
    """Each row's value with the fault planted on its path."""
    values = rows["value"].astype(float).copy()
    if fault.path is None:
        return values
    on = rows["path"] == fault.path
    values[on] *= np.where(rows.loc[on, "better"] == "higher", 1 - fault.move, 1 + fault.move)
    samples = on & rows["sample"].notna()
    if fault.spread != 1.0:
        figures = [rows.loc[samples, k] for k in ("test", "case", "figure")]
        center = values[samples].groupby(figures).transform("median")
        values[samples] = center * (values[samples] / center) ** fault.spread
    if fault.nan:
        first = samples & (rows["sample"] == 1)
        values[first] = np.nan
    return values


# --- an upgrade's runs, replayed ---------------------------------------------


@dataclass
class ReplayedUpgrade:
    """A replayed upgrade: its paired verdict, confirmed by a rerun where something was flagged."""

    first: verdict.Verdict
    final: verdict.Verdict

    def flagged(self) -> list[str]:
        return self.final.flagged_paths()


class UpgradeBench:
    """A committed upgrade's runs on one node (results/upgrades/NAME), both
    sides, replayed through the loader and the verdict's paired design as
    `./suite upgrade` judges them. The committed upgrade found nothing moved,
    so its 2N runs are taken as exchangeable: each replay deals them into N
    pairs at random (the old side of each pair first), a permutation of the
    real runs, their real run-to-run noise on that node and its transients;
    a fault is planted on the new side. A flagged path is confirmed as the
    upgrade confirms it: two more runs drawn, the new one judged against
    every old one. The noise is one node's, one day's; an upgrade on a node
    whose runs spread more than these is judged on its own spread."""

    def __init__(self, name: str, alpha: float = 0.05):
        record = json.loads((UPGRADES / name / "rounds.json").read_text())
        self.system, self.alpha = record["system"], alpha
        frame = load([PERFLOGS / self.system], warn=None).frame
        frame = frame[from_perflogs(frame) & frame["sample"].notna()]
        self.runs = []
        for round_ in record["rounds"]:
            for side, window in round_.items():
                rows = frame[run_rows(frame, self.system, [window]) & frame["environ"].isin(record["sides"][side])]
                self.runs.append(_with_paths(rows))
        self.paths = sorted(set().union(*(set(r["path"]) for r in self.runs)) - {""})
        self._file_lines = _line_reader()
        self._cache: dict[tuple, pd.DataFrame] = {}

    def upgrade(
        self, rng: np.random.Generator, fault: Fault = Fault(), transient: Fault | None = None
    ) -> ReplayedUpgrade:
        """One replayed upgrade: `fault` on every new run (and its rerun), `transient` on the first new run only."""
        order = rng.permutation(len(self.runs))
        runs = []
        for i in range(0, len(order) - 1, 2):
            runs += [(order[i], Fault()), (order[i + 1], transient if transient is not None and i == 0 else fault)]
        first = self._judge_pairs(runs)
        if not first.flagged_paths():
            return ReplayedUpgrade(first, first)
        again = rng.choice(len(self.runs), 2, replace=False)
        frame, masks = self._read_back([*runs[::2], (again[0], Fault()), (again[1], fault)])
        olds = {f"old{i}": m for i, m in enumerate(masks[:-1], start=1)}
        rerun = verdict.judge(frame, olds, masks[-1], self.alpha, physical=True)
        return ReplayedUpgrade(first, verdict.confirm(first, rerun))

    def _judge_pairs(self, runs: list[tuple[int, Fault]]) -> verdict.Verdict:
        """As `verdict.judge_pairs` judges them, each run's table of values made once (a replay only deals them)."""
        tables, labels = [], []
        for k, (index, fault) in enumerate(runs):
            label = f"{'old' if k % 2 == 0 else 'new'}{k // 2 + 1}"
            tables.append(self._values(index, fault).assign(run=label))
            labels.append(label)
        return verdict.judge_pair_values(
            pd.concat(tables, ignore_index=True), list(zip(labels[::2], labels[1::2])), self.alpha
        )

    def _values(self, index: int, fault: Fault) -> pd.DataFrame:
        if (index, fault, "values") not in self._cache:
            frame = self._loaded(index, fault)
            self._cache[(index, fault, "values")] = verdict.attach_paths(
                verdict.run_values(frame, {"run": frame["time"].notna()}, physical=True)
            )
        return self._cache[(index, fault, "values")]

    def _read_back(self, runs: list[tuple[int, Fault]]) -> tuple[pd.DataFrame, list[pd.Series]]:
        """The runs (by index, each with its fault) as read back from perflog
        text, a minute apart in one environment; each run's mask."""
        parts = [
            self._loaded(index, fault).assign(time=REPLAY_EPOCH + pd.Timedelta(minutes=k))
            for k, (index, fault) in enumerate(runs)
        ]
        frame = pd.concat(parts, ignore_index=True)
        return frame, [frame["time"] == REPLAY_EPOCH + pd.Timedelta(minutes=k) for k in range(len(runs))]

    def _loaded(self, index: int, fault: Fault) -> pd.DataFrame:
        """One run with its fault planted, written as perflog text and read back
        by the loader (once per run and fault: a replay only deals them out)."""
        if (index, fault) not in self._cache:
            rows = self.runs[index]
            stamps = pd.Series(REPLAY_EPOCH, index=rows.index)
            texts = perflog_texts(rows, _planted(rows, fault), stamps, self._file_lines, "gnu")
            self._cache[(index, fault)] = read_back(texts)
        return self._cache[(index, fault)]


def measure(bench: Bench, nights: int, per_path: int, seed: int, out=print) -> None:
    """What README and docs/verdict.md say of the verdict, replayed: each
    committed night whole, `nights` clean nights drawn, and per path
    `per_path` nights with a 7% move and as many with samples spread x10."""
    for stamp in bench.nights:
        night = bench.committed(stamp)
        flags = f"first {night.first.flagged_paths()}, confirmed {night.flagged()}, not rerun {night.not_rerun()}"
        out(f"{stamp} exit {night.exit}: {flags}")
    rng = np.random.default_rng(seed)
    clean = [bench.night(rng) for _ in range(nights)]
    moved = [night.flagged() for night in clean if night.exit == 2]
    first = sum(bool(night.first.flagged_paths()) for night in clean)
    out(f"clean: {nights} nights, flagged on the first run {first}, exit 2 {len(moved)}: {moved}")
    for path in bench.paths:
        caught = sum(path in bench.night(rng, Fault(path, move=0.07)).flagged() for _ in range(per_path))
        unstable = sum(
            bench.night(rng, Fault(path, spread=10.0)).final.paths.set_index("path").loc[path, "verdict"] == "unstable"
            for _ in range(per_path)
        )
        out(f"{path}: 7% caught {caught}/{per_path}, x10 spread unstable {unstable}/{per_path}")


#: The fault of one run caught in a transient: far beyond any floor, in one run alone.
TRANSIENT = 0.4


def measure_upgrade(bench: UpgradeBench, upgrades: int, per_path: int, seed: int, out=print) -> None:
    """What docs/upgrade.md says of an upgrade's verdict, replayed: `upgrades`
    that change nothing, and per path `per_path` with a 7% drop on the new
    side (caught, and on how many of the path's figures) and as many with a
    40% drop in one new run alone (called moved)."""
    rng = np.random.default_rng(seed)
    null = [bench.upgrade(rng).flagged() for _ in range(upgrades)]
    out(f"nothing changed: {upgrades} upgrades, flagged {sum(map(bool, null))}: {[f for f in null if f]}")
    for path in bench.paths:
        caught, keys, moved = 0, [], 0
        for _ in range(per_path):
            replayed = bench.upgrade(rng, Fault(path, move=0.07))
            if path in replayed.flagged():
                caught += 1
                figures = replayed.first.figures[replayed.first.figures["path"] == path]
                keys.append(f"{(figures['verdict'] == 'moved').sum()}/{len(figures)}")
            transient = bench.upgrade(rng, transient=Fault(path, move=TRANSIENT))
            moved += path in transient.flagged()
        out(
            f"{path}: 7% caught {caught}/{per_path} (figures moved: {' '.join(sorted(set(keys))) or '-'}), "
            f"40% in one new run called moved {moved}/{per_path}"
        )


def as_partition(bench: Bench, alpha: float = 0.05) -> partition.Partition:
    """The bench's committed clean nights, each on a separately started node,
    judged as the nodes of one partition's night (each night a node named by
    its stamp) by the partition's judge, against the same accepted runs. A
    harsher test than a real partition's: these nodes did not share an hour."""
    tonight = _node_table({stamp: night for stamp, night in bench.nights.items()})

    def own_reruns(flagged: list[tuple[str, str]]) -> pd.DataFrame | None:
        """Each flagged night's own committed rerun, where it had one."""
        stamps = sorted({stamp for stamp, _ in flagged if stamp in bench.reruns})
        return _node_table({stamp: bench.reruns[stamp] for stamp in stamps}) if stamps else None

    return _partition_judged(tonight, _accepted_values(bench), alpha, own_reruns)


def _accepted_values(bench: Bench) -> pd.DataFrame:
    """The bench's accepted runs as the partition's judge takes them (run_values with paths)."""
    masks = accepted_masks(bench.base, bench.system, bench.accepted)
    return verdict.attach_paths(verdict.run_values(bench.base, masks, physical=True))


def _node_table(nights: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Committed nights' rows as the partition's per-node table, each night a node named by its stamp."""
    rows = pd.concat([night.assign(node=stamp) for stamp, night in nights.items()], ignore_index=True)
    return verdict.attach_paths(partition.node_values(rows, pd.Series(True, index=rows.index)))


def measure_partition(bench: Bench, out=print) -> None:
    """What docs/verdict.md says of the committed nights as one partition."""
    result = as_partition(bench, bench.alpha)
    faults, fleet = result.faults(), result.fleet
    out(
        f"nodes {len(result.nodes)}, paths {result.cells['path'].nunique()}, cells judged "
        f"{int(result.cells['z'].notna().sum())}; node faults {len(faults)} on {faults['node'].nunique()} node(s); "
        f"fleet changes {list(result.fleet_changes()['path'])}; improved "
        f"{list(fleet.loc[fleet['verdict'] == partition.Fleet.IMPROVED, 'path'])}"
    )
    for row in faults.itertuples():
        out(
            f"  {row.node} {row.path}: {row.vs_siblings_pct:+.1f}% vs siblings (z {row.z:.1f}), "
            f"{row.vs_history_pct:+.1f}% vs accepted: {row.verdict}"
        )
    for row in result.cells[result.cells["verdict"] == partition.Cell.TRANSIENT].itertuples():
        out(
            f"  {row.node} {row.path}: {row.vs_siblings_pct:+.1f}% vs siblings (z {row.z:.1f}), "
            f"its rerun {row.rerun_vs_siblings_pct:+.1f}%: transient"
        )
    worst = result.cells.sort_values("z", ascending=False).drop_duplicates("node").head(6)
    for row in worst.itertuples():
        out(
            f"  worst of {row.node}: {row.path} {row.vs_siblings_pct:+.1f}% vs siblings "
            f"(spread {row.spread_pct:.1f}%, z {row.z:.1f}, adjusted p {row.p_adjusted:.2g}): {row.verdict}"
        )


def partition_power(
    bench: Bench,
    nodes: int = 8,
    speeds: tuple[float, ...] = (1.0, 0.75, 0.5),
    draws: int = 20,
    seed: int = 1,
    paths: list[str] | None = None,
) -> pd.DataFrame:
    """Per path (of `paths`, else every one) and speed: in how many of
    `draws` partitions of `nodes` of the bench's committed nights (those that
    measured every path, each a node) the one slowed on the path to that
    speed (0.5: half as fast, its rates halved and its times doubled; 1:
    nothing planted) is named there, and in how many any other cell is
    named (by node, how often: with nothing planted, every name); the
    partition's judge as its nightly runs it, a
    named node confirmed by its rerun: its night's own committed rerun of
    the path, else the path's lines of another night (a fault lasts: it is
    planted again). With each path's spread between the nights (robust SD
    of their levels)."""
    nights = {s: n for s, n in bench.nights.items() if set(bench.paths) <= set(n["path"])}
    if len(nights) < nodes:
        raise ValueError(f"{len(nights)} committed nights measured every path: too few for {nodes} nodes")
    tonight = _node_table(nights)
    reruns = _node_table({s: r for s, r in bench.reruns.items() if s in nights}) if bench.reruns else tonight.iloc[:0]
    past = _accepted_values(bench)
    between = partition.levels(tonight).siblings.apply(lambda c: partition.robust_sd(c.dropna().to_numpy()))
    rng = np.random.default_rng(seed)
    stamps = sorted(nights)

    def _rerun(flagged: list[tuple[str, str]], fault: tuple[str, str, float]) -> pd.DataFrame:
        """The flagged cells measured again: the night's own rerun of the path, else another night's."""
        parts = []
        for node, path in flagged:
            own = reruns[(reruns["node"] == node) & (reruns["path"] == path)]
            if own.empty:
                other = [s for s in stamps if s != node]
                stamp = other[rng.integers(len(other))]
                own = tonight[(tonight["node"] == stamp) & (tonight["path"] == path)].assign(node=node)
            parts.append(own)
        return _slowed(pd.concat(parts, ignore_index=True), fault)

    rows = []
    for path in paths or bench.paths:
        row = {"path": path, "between_nodes_pct": float(np.expm1(between.get(path, np.nan)) * 100), "draws": draws}
        for speed in speeds:
            named = others = 0
            who: Counter[str] = Counter()
            for _ in range(draws):
                chosen = list(rng.choice(stamps, nodes, replace=False))
                fault = (chosen[0], path, speed)
                night = _slowed(tonight[tonight["node"].isin(chosen)], fault)
                result = _partition_judged(
                    night, past, bench.alpha, lambda flagged, fault=fault: _rerun(flagged, fault)
                )
                faults = set(zip(result.faults()["node"], result.faults()["path"]))
                planted = {(chosen[0], path)} if speed < 1 else set()  # unslowed, every name is a false one
                named += (chosen[0], path) in faults
                wrong = {node for node, _ in faults - planted}
                others += bool(wrong)
                who.update(wrong)
            row[f"named_at_{speed:g}"] = named
            row[f"others_named_at_{speed:g}"] = others
            row[f"others_at_{speed:g}"] = dict(sorted(who.items()))
        rows.append(row)
    return pd.DataFrame(rows)


#: The issue's lines for a partition of eight: (speed, share of partitions, the paths held to it: spread under %).
PARTITION_LINES = ((0.5, 1.0, math.inf), (0.75, 0.95, 5.0))


def measure_partition_power(table: pd.DataFrame, out=print) -> None:
    """What docs/verdict.md says of partition_power's table: per path, each
    of the issue's lines it was measured for, and the false names."""
    with pd.option_context("display.width", 250, "display.max_colwidth", 80):
        out(table.round(1).to_string(index=False))
    for speed, share, spread in PARTITION_LINES:
        if f"named_at_{speed:g}" not in table.columns:
            continue
        held = table[table["between_nodes_pct"] < spread]
        met = int((held[f"named_at_{speed:g}"] >= share * held["draws"]).sum())
        which = "" if math.isinf(spread) else f" of those spread under {spread:g}% between nodes"
        often = "every partition" if share == 1 else f"{share:.0%} of partitions or more"
        out(f"a node at {speed:g} of its speed named in {often}: on {met} of {len(held)} paths{which}")
    if "others_at_1" in table.columns:
        named = sum((Counter(cell) for cell in table["others_at_1"]), Counter())
        who = ", ".join(f"{node} in {count}" for node, count in named.most_common()) or "none"
        out(
            f"nothing planted, a node named: in {int(table['others_named_at_1'].sum())} of "
            f"{int(table['draws'].sum())} partitions ({who})"
        )


def _slowed(table: pd.DataFrame, fault: tuple[str, str, float]) -> pd.DataFrame:
    """A node table with one node's figures on one path at a speed (0.75: a
    quarter slower, its rates times 0.75, its times over 0.75)."""
    node, path, speed = fault
    on = (table["node"] == node) & (table["path"] == path)
    worse = np.where(table.loc[on, "better"] == "higher", speed, 1 / speed)
    table = table.copy()
    table.loc[on, "value"] = table.loc[on, "value"] * worse
    return table


def _partition_judged(night: pd.DataFrame, past: pd.DataFrame, alpha: float, rerun_of) -> partition.Partition:
    """A partition's night judged, its named cells confirmed as the
    partition's nightly confirms them, by `rerun_of(flagged cells)` (None:
    nothing measured again, the cells stand unconfirmed)."""
    first = partition.judge(partition.levels(night, past), alpha)
    faults = first.faults()
    rerun = None if faults.empty else rerun_of(list(zip(faults["node"], faults["path"])))
    if rerun is None:
        return first
    again = partition.judge(partition.levels(partition.with_rerun(night, rerun), past), alpha)
    return partition.confirm(first, again, partition.measured_pairs(rerun))


def partition_night(bench: Bench, stamp: str, alpha: float = 0.05) -> Path:
    """The bench's committed clean nights judged as one partition's nodes
    (as_partition) written as a partition's night is, by the partition's own
    writers: run.json (`replay` says what it is), cells.csv, fleet.csv,
    nodes.csv, drain.txt and its page, under results/nightly/<system>/<stamp>/,
    each node named by its night's folder (its stamp without colons). Only
    the nights that measured every path are its nodes: a partition's nodes
    run the same checks, and the first nights ran fewer. Its window is the
    moment it was written: no record of the perflogs is of it."""
    bench = copy.copy(bench)
    bench.nights = {s: n for s, n in bench.nights.items() if set(bench.paths) <= set(n["path"])}
    bench.reruns = {s: r for s, r in bench.reruns.items() if s in bench.nights}
    result = as_partition(bench, alpha)
    named = {node: node.replace(":", "") for node in result.nodes["node"]}
    result = partition.Partition(
        result.cells.assign(node=result.cells["node"].map(named)),
        result.fleet,
        result.nodes.assign(node=result.nodes["node"].map(named)),
        [named[n] for n in result.silent],
    )
    nights = sorted(bench.nights)
    run = {
        "system": bench.system,
        "stamp": stamp,
        "start": stamp,
        "end": stamp,
        "partition": "default",
        "nodes_asked": "all",
        "nodes": list(result.nodes["node"]),
        "kind": bench.kind,
        "replay": (
            f"A replay, not a night measured at once: the {len(nights)} committed clean nights of {bench.kind} "
            f"that measured every path ({nights[0][:10]} to {nights[-1][:10]}), each on a separately started "
            "node, judged "
            "as the nodes of one partition's night by the partition's judge, against the same accepted runs, "
            "each flagged night confirmed by its own rerun (runner/replay.py, partition_night)"
        ),
    }
    outdir = NIGHTLY_DIR / bench.system / stamp.replace(":", "")
    outdir.mkdir(parents=True, exist_ok=True)
    history = (result.fleet["verdict"] != partition.Fleet.UNJUDGED).any()
    judged = result.cells["verdict"].isin([partition.Cell.PASS, partition.Cell.NODE_FAULT, partition.Cell.BOTH])
    status = runner_partition.partition_status(result, {}, bool(judged.any()) or history, history, False)
    runner_partition.write_results(outdir, run, result, {}, status, bench.accepted)
    runner_partition.write_page(bench.system, run, result, outdir)
    return outdir


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m runner.replay", description=measure.__doc__)
    parser.add_argument("--system", default="hopper-vm")
    parser.add_argument("--kind", default="1 x NVIDIA H100 80GB HBM3")
    parser.add_argument("--nights", type=int, default=200, help="clean nights drawn (default 200)")
    parser.add_argument("--per-path", type=int, default=20, help="nights per path and fault (default 20)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--leave-out", nargs="*", default=[], metavar="STAMP", help="committed nights not drawn")
    parser.add_argument("--upgrade", metavar="NAME", help="replay the committed upgrade results/upgrades/NAME instead")
    parser.add_argument("--partition", action="store_true", help="judge the committed nights as one partition's nodes")
    parser.add_argument(
        "--partition-power",
        type=int,
        metavar="NODES",
        help="instead: partitions of NODES committed nights, one slowed on each path in turn (partition_power; "
        "--per-path partitions per path and speed)",
    )
    parser.add_argument(
        "--write-night",
        nargs="?",
        const="now",
        metavar="STAMP",
        help="with --partition: write it as a partition's night stamped STAMP (default: now) in "
        "results/nightly/SYSTEM/, its page included",
    )
    args = parser.parse_args(argv)
    if args.partition_power is not None:
        if args.partition_power < 3 or args.per_path < 1:
            parser.error("--partition-power needs 3 nodes or more (two have no siblings), --per-path 1 or more")
        bench = Bench(args.system, args.kind, leave_out=tuple(args.leave_out))
        try:
            table = partition_power(bench, args.partition_power, draws=args.per_path, seed=args.seed)
        except ValueError as err:
            parser.error(f"--partition-power {args.partition_power}: {err}")
        print(f"# {args.system}, {args.kind}: partitions of {args.partition_power} of its committed nights")
        measure_partition_power(table, out=lambda line: print(line, flush=True))
        return 0
    if args.partition and args.write_night:
        bench = Bench(args.system, args.kind, leave_out=tuple(args.leave_out))
        stamp = now() if args.write_night == "now" else args.write_night
        print(f"# {args.system}, {args.kind}: a partition's night written to {partition_night(bench, stamp)}")
        return 0
    if args.partition:
        bench = Bench(args.system, args.kind, leave_out=tuple(args.leave_out))
        print(f"# {args.system}, {args.kind}: {len(bench.nights)} committed clean nights as one partition's nodes")
        measure_partition(bench, out=lambda line: print(line, flush=True))
        return 0
    if args.upgrade:
        upgrade = UpgradeBench(args.upgrade)
        print(f"# {args.upgrade}: {len(upgrade.runs)} runs on one node, {len(upgrade.paths)} paths")
        measure_upgrade(upgrade, args.nights, args.per_path, args.seed, out=lambda line: print(line, flush=True))
        return 0
    bench = Bench(args.system, args.kind, leave_out=tuple(args.leave_out))
    print(f"# {args.system}, {args.kind}: {len(bench.nights)} committed clean nights, {len(bench.paths)} paths")
    measure(bench, args.nights, args.per_path, args.seed, out=lambda line: print(line, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
