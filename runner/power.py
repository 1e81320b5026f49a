"""How well the nightly's verdict sees a move, from the accepted runs themselves.

    python -m commands power [--system NAME] [--move PCT ...] [--nights N] [--csv FILE]
    python -m commands power [--system NAME] [--kind KIND] --runs 3 5 10

For each path of the accepted baseline: how often a night that changed
nothing flags it (false alarms), and how often a night whose figures on that
path moved by each --move percent (worse) flags it (power), over --nights
simulated nights each. Two kinds of night:

- replayed: each accepted run in turn is tonight, judged against the other
  accepted runs, with the move planted in its figures on the path: real
  nights, as many as there are accepted runs (the baseline is one run
  smaller than the nightly's);
- simulated: nights drawn from a model fitted to the accepted runs (a
  shared effect per path and run, and a residual per figure, each normal on
  the log scale with the robust spread the accepted runs show), judged
  against as many simulated accepted runs as the baseline has.

and, third, the judge's test bench (runner/replay.py): the kind's
committed clean nights outside the accepted runs, replayed through the
perflog files, the loader and the nightly's own functions, reruns included,
with the move planted on the path (--bench-nights each): the figure to
trust where it and the simulation disagree (README and docs/verdict.md
quote the bench's).

With --runs N ...: instead, each path's smallest move seen in 95% of
nights judged against N accepted runs (runs_sweep), replayed from the
kind's real runs (its accepted runs and committed nights) and simulated:
what a new kind's first weeks can see, and what more runs would buy.

A path whose power is under 90% at a 10% move cannot tell a 10% move from
the spread between separately started nodes; the power at larger moves
says what move it can see, which is the honest answer where the spread is
the nodes', not the measurement's.
"""

from __future__ import annotations

import argparse
import math
import shlex
from dataclasses import dataclass

import numpy as np
import pandas as pd

from experiments.progress import Progress
from judge import verdict
from judge.select import accepted_masks, windows_of
from reports.load import load
from reports.runs import PERFLOGS, nights_outside, read_accepted, read_baselines, selected_system
from runner import nightly


def accepted_tables(
    system: str, statistics: tuple[str, ...] = ("median",), kind: str | None = None
) -> list[pd.DataFrame]:
    """The accepted runs' per-run table (run_values with paths) of one kind
    of node (the system's only one by default), by run stamp, for each
    statistic, from one reading of the perflogs."""
    return [verdict.attach_paths(values) for values in accepted_run_values(system, statistics, kind)]


def accepted_run_values(
    system: str, statistics: tuple[str, ...] = ("median",), kind: str | None = None
) -> list[pd.DataFrame]:
    """accepted_tables' run_values, before their paths are attached (the tests keep one kind's)."""
    accepted = _accepted(system, kind)
    frame = load([PERFLOGS / system], warn=None, windows=windows_of(accepted["runs"])).frame
    masks = accepted_masks(frame, system, accepted)
    return [verdict.run_values(frame, masks, s) for s in statistics]


def _accepted(system: str, kind: str | None) -> dict:
    """The kind's accepted runs, or the mistake named (exit 3 by the suite's SystemExit)."""
    accepted = read_accepted(system, kind)
    if accepted is None and kind is None and read_baselines(system):
        choices = ", ".join(f"--kind {shlex.quote(k)}" for k in sorted(read_baselines(system)))
        raise SystemExit(f"power: {system} has accepted runs of several kinds of node: give one: {choices}")
    if accepted is None:
        kinds = "; ".join(sorted(read_baselines(system)))
        which = f"--kind {kind!r}" if kind else "a --kind" if kinds else "./suite accept"
        raise SystemExit(f"power: {system} has no accepted runs of that kind ({which}; accepted: {kinds or 'none'})")
    return accepted


def kind_runs_table(system: str, kind: str | None = None) -> pd.DataFrame:
    """Every real run of one kind of node a baseline could be drawn from: its
    accepted runs and its committed nights outside them (no drill, no
    partition's night: the test bench's nights, runner/replay.py), their run
    medians with paths, by run stamp."""
    accepted = _accepted(system, kind)
    nights = nights_outside(system, accepted)
    runs = [*accepted["runs"], *nights]
    frame = load([PERFLOGS / system], warn=None, windows=windows_of(runs)).frame
    masks = accepted_masks(frame, system, {"runs": runs})
    return verdict.attach_paths(verdict.run_values(frame, masks))


def accepted_table(system: str, kind: str | None = None) -> pd.DataFrame:
    """The accepted runs' per-run table of run medians."""
    return accepted_tables(system, kind=kind)[0]


def spreads_by_statistic(system: str, kind: str | None = None) -> pd.DataFrame:
    """Per path, the spread between the accepted runs of each run's median and
    of each run's best sample: whether measuring a run better (its best of
    several) would narrow what a night is judged against. Where the spread is
    the nodes', it does not."""
    statistics = ("median", "best")
    tables = accepted_tables(system, statistics, kind)
    spreads = {s: Model.fit(t).path_spread for s, t in zip(statistics, tables, strict=True)}
    paths = sorted(spreads["median"])
    return pd.DataFrame({"path": paths, **{f"{s}_spread_pct": [spreads[s][p] * 100 for p in paths] for s in spreads}})


def judged_rows(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of figures the verdict judges: on a path, not a yardstick, with a direction."""
    return table[(table["path"] != "") & (table["yardstick"] == "") & (table["better"] != "")]


def plant(night: pd.DataFrame, path: str | None, move: float, spread: float = 1.0) -> pd.DataFrame:
    """Tonight's rows with the figures of `path` moved worse by `move` (a
    fraction) and their samples' spread (cv) multiplied by `spread`."""
    night = night.copy()
    on = night["path"] == path
    worse = np.where(night["better"] == "higher", 1 - move, 1 + move)
    night.loc[on, "value"] = night.loc[on, "value"] * worse[on.to_numpy()]
    night.loc[on, "cv"] = night.loc[on, "cv"] * spread
    return night


def replayed_nights(table: pd.DataFrame):
    """Each accepted run as tonight against the others: (baseline, tonight) pairs."""
    for run in table["run"].unique():
        yield table[table["run"] != run], table[table["run"] == run].assign(run="tonight")


@dataclass
class Model:
    """Per figure its center and residual spread, per path its shared spread,
    per figure its typical within-run CV: fitted robustly to the accepted runs."""

    figures: pd.DataFrame  # one row per figure: key, path..., center, residual, cv
    path_spread: dict[str, float]
    runs: int
    path_runs: dict[str, int]  # how many accepted runs measured each path (a newer path: fewer)

    @classmethod
    def fit(cls, table: pd.DataFrame) -> Model:
        rows = judged_rows(table)
        key = ["test", "case", "environ", "figure", "unit"]
        logs = rows.assign(log=np.log(rows["value"]))
        center = logs.groupby(key)["log"].transform("median")
        logs = logs.assign(dev=logs["log"] - center)
        shared = logs.groupby(["path", "run"])["dev"].transform("median")
        logs = logs.assign(residual=logs["dev"] - shared)
        path_spread = {
            p: verdict.robust_spread(g.groupby("run")["dev"].median().to_numpy())[1] for p, g in logs.groupby("path")
        }
        first = logs.groupby(key).first().reset_index()
        per_figure = logs.groupby(key).agg(center=("log", "median"), cv=("cv", "median")).reset_index()
        per_figure["residual"] = list(
            logs.groupby(key)["residual"].apply(lambda r: verdict.robust_spread(r.to_numpy())[1])
        )
        keep = [c for c in first.columns if c not in ("run", "value", "cv", "log", "dev", "residual")]
        path_runs = {p: int(n) for p, n in rows.groupby("path")["run"].nunique().items()}
        return cls(per_figure.merge(first[keep], on=key), path_spread, int(table["run"].nunique()), path_runs)

    def night(self, rng: np.random.Generator, label: str) -> pd.DataFrame:
        """One simulated run of every figure."""
        effects = {p: rng.normal(0, s) for p, s in self.path_spread.items()}
        shared = self.figures["path"].map(effects).to_numpy(float)
        noise = rng.normal(0, 1, len(self.figures)) * self.figures["residual"].to_numpy(float)
        values = np.exp(self.figures["center"].to_numpy(float) + shared + noise)
        return self.figures.assign(run=label, value=values, n=5, nan_samples="")

    def baseline_and_night(
        self, rng: np.random.Generator, runs: int | None = None
    ) -> tuple[pd.DataFrame, pd.DataFrame]:
        """A simulated baseline, each path in as many runs as the accepted runs
        measured it (no kinder than they are), or in `runs` runs each where
        given (a kind that has measured every path from its first night), and a
        simulated night."""
        made = [self.night(rng, f"r{i}") for i in range(runs or self.runs)]
        base = made if runs else [run[run["path"].map(self.path_runs) > i] for i, run in enumerate(made)]
        return pd.concat(base, ignore_index=True), self.night(rng, "tonight")


#: The share of nights a path's smallest seen move is seen in.
SEEN_IN = 0.95


def others_pool(system: str, kind: str | None = None) -> verdict.Pool:
    """The spreads the system's other kinds of node measured, which a night
    of this kind draws its priors on (runner/nightly.py's others_pool)."""
    baselines = list(read_baselines(system).values())
    frame = load([PERFLOGS / system], warn=None, windows=windows_of([r for b in baselines for r in b["runs"]])).frame
    return nightly.others_pool(frame, system, read_accepted(system, kind))


def smallest_and_target(located: verdict.Located, alpha: float) -> dict[str, tuple[float, float]]:
    """Per path a located night judged: the smallest move worse it flags
    (verdict.smallest_seen, a fraction) and the issue's aim for it, twice its
    floor and three of its (moderated) spreads (percent)."""
    seen = verdict.smallest_seen(located.paths, alpha)
    judged = located.paths[located.paths["path"].isin(seen)]
    rows = judged[["path", "floor_pct", "spread_pct"]].itertuples(index=False)
    return {p: (seen[p], 2 * floor + 3 * spread) for p, floor, spread in rows}


def seen_in_95(smallest: list[float]) -> float:
    """The move seen in 95% of the nights that judged a path: their smallest
    flagged moves' 95th percentile (the larger), percent; NaN for none."""
    found = np.asarray(smallest, dtype=float)
    return float(np.quantile(found, SEEN_IN, method="higher")) * 100 if found.size else math.nan


def sweep(
    table: pd.DataFrame,
    moves: list[float],
    nights: int,
    alpha: float,
    seed: int = 1,
    pool: verdict.Pool = verdict.NO_POOL,
    rules: verdict.Rules = verdict.ALL_RULES,
) -> pd.DataFrame:
    """Per path: false alarms in clean nights, and the share of nights that
    flag it when its figures move worse by each of `moves` (fractions),
    replayed and simulated, each night judged as the nightly judges it (with
    the `pool` of the system's other kinds of node), by `rules`."""
    model = Model.fit(table)
    paths = sorted(model.path_spread)
    rng = np.random.default_rng(seed)
    rows = {
        p: {
            "path": p,
            "spread_pct": model.path_spread[p] * 100,
            "replay_nights": 0,
            "replay_false": 0,
            "sim_nights": nights,
            "sim_false": 0,
            **{f"{how}_power_{move * 100:g}": 0 for how in ("replay", "sim") for move in moves},
        }
        for p in paths
    }
    smallest: dict[str, list[float]] = {p: [] for p in paths}
    target: dict[str, list[float]] = {}  # per night: twice its floor and three of its (moderated) spreads
    pairs = [("replay", base, night) for base, night in replayed_nights(table)]
    pairs += [("sim", *model.baseline_and_night(rng)) for _ in range(nights)]
    progress = Progress("power", "replayed and simulated nights", len(pairs))
    for how, base, night in pairs:
        # Located once a night; each planted move then locates its path's figures again (verdict.Located).
        located = verdict.locate_values(pd.concat([base, night], ignore_index=True), pool, rules)
        clean = set(located.flagged(alpha))
        measured = set(judged_rows(night)["path"])
        for p in paths:
            if p not in measured:  # a replayed run from before the path existed says nothing of it
                continue
            rows[p][f"{how}_nights"] += how == "replay"
            rows[p][f"{how}_false"] += p in clean
            on_path = night[night["path"] == p]
            for move in moves:
                column = f"{how}_power_{move * 100:g}"
                rows[p][column] += p in located.flagged(alpha, plant(on_path, p, move))
        for p, (seen, aim) in smallest_and_target(located, alpha).items():
            if p in smallest:
                smallest[p].append(seen)
                target.setdefault(p, []).append(aim)
        progress.step()
    for p in paths:
        rows[p]["seen_95_pct"] = seen_in_95(smallest[p])
        rows[p]["target_pct"] = float(np.median(target[p])) if target.get(p) else math.nan
    table = pd.DataFrame(list(rows.values()))
    for how in ("replay", "sim"):
        for move in moves:
            column = f"{how}_power_{move * 100:g}"
            table[column] = table[column] / table[f"{how}_nights"].clip(lower=1)
    return table


def runs_sweep(
    table: pd.DataFrame,
    counts: list[int],
    nights: int,
    alpha: float,
    seed: int = 1,
    pool: verdict.Pool = verdict.NO_POOL,
) -> pd.DataFrame:
    """Per path and count of accepted runs: the smallest move worse seen in
    95% of nights judged against that many runs (verdict.smallest_seen), and
    the median of twice the path's floor and three of its (pooled) spreads,
    from `nights` nights of each of two kinds:

    - replayed: that many of the kind's real runs that measured every path
      (`table`: kind_runs_table) drawn at random as the baseline, tonight one
      of the runs left out; none where the kind has no run to leave out (a
      run from before a path existed would leave that path judged on fewer);
    - simulated: baseline and night drawn from the model fitted to all of
      them, every path measured in every run.
    """
    model = Model.fit(table)
    stamps = complete_runs(table)
    rng = np.random.default_rng(seed)
    plans = [(count, how) for count in counts for how in ("replayed", "simulated")]
    progress = Progress("power", "nights judged against fewer or more runs", nights * len(plans))
    rows = []
    for count, how in plans:
        seen: dict[str, list[float]] = {}
        target: dict[str, list[float]] = {}
        for _ in range(_nights_of(how, nights, count, len(stamps))):
            base, night = (
                _replayed_draw(table, stamps, count, rng) if how == "replayed" else model.baseline_and_night(rng, count)
            )
            located = verdict.locate_values(pd.concat([base, night], ignore_index=True), pool)
            for p, (smallest, aim) in smallest_and_target(located, alpha).items():
                seen.setdefault(p, []).append(smallest)
                target.setdefault(p, []).append(aim)
            progress.step()
        rows += [
            {
                "path": p,
                "runs": count,
                "how": how,
                "nights": len(moves),
                "seen_95_pct": seen_in_95(moves),
                "target_pct": float(np.median(target[p])),
            }
            for p, moves in sorted(seen.items())
        ]
    return pd.DataFrame(rows, columns=["path", "runs", "how", "nights", "seen_95_pct", "target_pct"])


def _nights_of(how: str, nights: int, count: int, runs: int) -> int:
    """How many nights runs_sweep draws of a kind: a replayed baseline of
    `count` runs needs one of the `runs` left over to be tonight."""
    return nights if how == "simulated" or runs > count else 0


def complete_runs(table: pd.DataFrame) -> list[str]:
    """The runs of `table` that measured every judged path of it, by stamp."""
    rows = judged_rows(table)
    paths = rows.groupby("run")["path"].nunique()
    return sorted(paths.index[paths == rows["path"].nunique()])


def _replayed_draw(
    table: pd.DataFrame, stamps: list[str], count: int, rng: np.random.Generator
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`count` of the real runs at random as the baseline, and one of the others as tonight."""
    order = rng.permutation(len(stamps))
    base = [stamps[i] for i in order[:count]]
    tonight = stamps[order[count]]
    return table[table["run"].isin(base)], table[table["run"] == tonight].assign(run="tonight")


def runs_summary(result: pd.DataFrame) -> pd.DataFrame:
    """runs_sweep's table, a row per path: the smallest move seen in 95% of
    nights with each count of runs (replayed where some replayed night judged
    the path with so many runs, else simulated: marked *), and the target
    with the fewest."""
    best = result.sort_values("how").drop_duplicates(["path", "runs"])  # 'replayed' sorts before 'simulated'
    cells = best.assign(
        cell=[_seen_words(v) + ("*" if how == "simulated" else "") for v, how in zip(best["seen_95_pct"], best["how"])]
    )
    table = cells.pivot(index="path", columns="runs", values="cell")
    table.columns = [f"seen_95_pct_{n}_runs" for n in table.columns]
    fewest = best[best["runs"] == best["runs"].min()].set_index("path")["target_pct"].round(1)
    return table.join(fewest.rename(f"target_pct_{best['runs'].min()}_runs")).reset_index()


def _seen_words(pct: float) -> str:
    """A smallest move seen, as the table shows it: past ten times the value, only that."""
    return ">1000" if pct > 1000 else f"{pct:.1f}"


def bench_sweep(
    system: str,
    kind: str,
    moves: list[float],
    nights: int,
    alpha: float = 0.05,
    seed: int = 1,
    paths=None,
    bench=None,
    rules: verdict.Rules = verdict.ALL_RULES,
) -> pd.DataFrame:
    """Per path, from the test bench: exit-2 flags in `nights` replayed clean
    nights, and the share of `nights` replayed nights that flag it with its
    figures moved worse by each of `moves` (an empty table where the kind has
    no committed night outside its accepted runs); of the given `paths` only,
    if any, on the given `bench` (one already read) if any."""
    from runner.replay import Bench, Fault  # the bench drives the nightly's functions: only this command needs it

    try:
        bench = bench or Bench(system, kind, alpha, rules=rules)
    except ValueError:
        return pd.DataFrame(columns=["path"])
    rng = np.random.default_rng(seed)
    clean = [bench.night(rng).flagged() for _ in range(nights)]
    rows, chosen = [], list(paths or bench.paths)
    progress = Progress("power", "the bench's paths", len(chosen))
    for path in chosen:
        row = {"path": path, "bench_nights": nights, "bench_false": sum(path in f for f in clean)}
        for move in moves:
            caught = sum(path in bench.night(rng, Fault(path, move=move)).flagged() for _ in range(nights))
            row[f"bench_power_{move * 100:g}"] = caught / nights
        rows.append(row)
        progress.step()
    return pd.DataFrame(rows)


#: The parts of the verdict --without may leave out (verdict.Rules' fields).
RULE_NAMES = tuple(verdict.Rules.__dataclass_fields__)


def rules_without(names: list[str]) -> verdict.Rules:
    """The verdict's rules with the named parts left out."""
    return verdict.Rules(**{name: name not in names for name in RULE_NAMES})


def add_parsers(sub) -> None:
    """power in the suite's one parser (commands/cli.py)."""
    parser = sub.add_parser("power", help=__doc__.splitlines()[0])
    parser.add_argument("--system")
    parser.add_argument("--kind", help="the kind of node whose baseline to read ('2 x NVIDIA H100 80GB HBM3')")
    parser.add_argument(
        "--move", type=float, nargs="+", default=[10.0], help="the planted moves, percent worse (default 10)"
    )
    parser.add_argument(
        "--nights", type=_count, default=30, help="simulated nights per path (default 30; with --runs, of each kind)"
    )
    parser.add_argument(
        "--bench-nights",
        type=int,
        default=20,
        help="replayed nights per path and move on the bench (default 20; 0: none)",
    )
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument(
        "--without",
        nargs="+",
        default=[],
        choices=RULE_NAMES,
        help="judge without these parts of the verdict (what each buys: docs/verdict.md)",
    )
    parser.add_argument("--csv", help="write the table here")
    instead = parser.add_mutually_exclusive_group()
    instead.add_argument(
        "--spreads", action="store_true", help="instead: each path's spread between runs (medians, best samples)"
    )
    instead.add_argument(
        "--runs",
        type=_run_count,
        nargs="+",
        metavar="N",
        help="instead: each path's smallest move seen in 95%% of nights judged against N accepted runs (3 or more), "
        "drawn from the kind's real runs where it has more than N, and simulated (--nights of each; --move and "
        "--bench-nights do not apply)",
    )
    parser.set_defaults(func=power)


def _at_least(least: int, words: str):
    """An argparse type: a whole count of `least` or more (`words`: that least in words)."""

    def count(text: str) -> int:
        if not text.isdigit() or int(text) < least:
            raise argparse.ArgumentTypeError(f"{text!r} is not a count of {words} or more")
        return int(text)

    return count


#: --nights N: one night or more; --runs N: a baseline the nightly judges by (three runs or more, as `accept` asks).
_count, _run_count = _at_least(1, "one night"), _at_least(3, "three runs")


def runs_power(args) -> int:
    """power --runs: the smallest move seen per path with each count of accepted runs."""
    system = selected_system(args.system)
    table = kind_runs_table(system, args.kind)
    result = runs_sweep(table, sorted(set(args.runs)), args.nights, args.alpha, pool=others_pool(system, args.kind))
    summary = runs_summary(result)
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(summary.to_string(index=False))
    print(
        f"the kind's real runs that measured every path: {len(complete_runs(table))} of {table['run'].nunique()} "
        f"(accepted and committed nights); per count of runs, "
        f"{args.nights} nights of each kind (* simulated: no replayed night judged the path with so many runs)"
    )
    for (count, how), rows in result.groupby(["runs", "how"]):
        within = int((rows["seen_95_pct"] <= rows["target_pct"]).sum())
        print(
            f"{count} runs, {how}: {within} of {len(rows)} paths see twice their floor and three of their spreads "
            f"in 95% of nights; median smallest move seen {rows['seen_95_pct'].median():.1f}%"
        )
    if args.csv:
        result.to_csv(args.csv, index=False)
    return 0


def power(args) -> int:
    if args.runs:
        return runs_power(args)
    if args.spreads:
        print(spreads_by_statistic(selected_system(args.system), args.kind).round(2).to_string(index=False))
        return 0
    system = selected_system(args.system)
    table = accepted_table(system, args.kind)
    rules = rules_without(args.without)
    pool = others_pool(system, args.kind)
    result = sweep(table, [m / 100 for m in args.move], args.nights, args.alpha, pool=pool, rules=rules)
    bench = pd.DataFrame(columns=["path"])
    if args.bench_nights > 0:
        kind = read_accepted(system, args.kind)["kind"]
        moves = [m / 100 for m in args.move]
        bench = bench_sweep(system, kind, moves, args.bench_nights, args.alpha, rules=rules)
        result = result.merge(bench, on="path", how="left")
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(result.round(3).to_string(index=False))
    within = int((result["seen_95_pct"] <= result["target_pct"]).sum())
    print(
        f"{within} of {len(result)} paths see, in 95% of the replayed and simulated nights, a move of twice their "
        "floor and three of their spreads (seen_95_pct <= target_pct)"
    )
    for move in args.move:
        strong = int((result[f"sim_power_{move:g}"] >= 0.9).sum())
        print(f"{strong} of {len(result)} paths flag a {move:g}% move in 90% of {args.nights} simulated nights")
    print(
        f"false alarms: {int(result['sim_false'].sum())} in {args.nights} simulated clean nights, "
        f"{int(result['replay_false'].sum())} in {int(result['replay_nights'].max())} replayed ones, "
        f"over {len(result)} paths"
    )
    for move in args.move if not bench.empty else []:
        seen = int((result[f"bench_power_{move:g}"] >= 0.9).sum())
        print(f"{seen} of {len(result)} paths flag a {move:g}% move in 90% of {args.bench_nights} nights on the bench")
    if not bench.empty:
        print(f"false alarms on the bench: {int(result['bench_false'].sum())} in {args.bench_nights} clean nights")
    elif args.bench_nights > 0:
        print("the bench: no committed night of this kind outside its accepted runs to replay")
    print(f"left out of the verdict (--without): {', '.join(args.without) or 'nothing'}")
    if args.csv:
        result.to_csv(args.csv, index=False)
    return 0
