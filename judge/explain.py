"""What a verdict means to whoever reads it, said from the verdict's own tables.

- **One sign.** Every change is shown as "% worse": the figure's change,
  signed so that positive is worse for a rate and a time alike (a rate at
  half is 50% worse, a time doubled 100% worse; a rate 30% up is -30%).
  The tables keep the values' own changes (`change_pct`: a rate's fall is
  negative); `worse_pct` turns them round where the path's direction says.
- **A reason for every verdict.** A path that passed though it moved
  beyond its floor says why: within the accepted runs' spread, or not
  beyond chance once every path of the night is judged at once (Holm); a
  move that went away says what its rerun measured; the judge's own
  reasons are said in words (no figure's internal name).
- **Two judges, one page.** A path of a node of several GPUs is judged
  against the accepted runs and against its sibling GPUs of the same
  night. Where one flags it and the other does not, both rows say why.
- **A next step.** Each finding, and the night as a whole, ends with what
  to do: drain the node, rerun the night, compare with its siblings, accept
  nights as the baseline, or nothing.

Pure functions over the tables a night keeps (paths.csv, siblings.csv,
cells.csv, fleet.csv, run.json as a dict); reports/ draws what they give.
Nights written before a column existed are explained with what they have.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from experiments.numbers import signed
from judge.verdict import holm, worse_pct  # worse_pct: the verdict's sign, said in words here too
from systems.finding_codes import catalogue, code_of, failed_checks

#: Kinds of path (systems/paths/paths.yaml) measured as times, where a
#: table written before it had a `better` column does not say: the others are rates.
TIME_KINDS = {"latency", "link-latency", "kernel"}
#: The verdict's family-wise level (runner/nightly.py's default --alpha): each family (paths, figures) takes half.
ALPHA = 0.05
#: Verdicts that are findings, of a path against the accepted runs and of a GPU against its siblings.
PATH_FINDINGS = ("moved", "unstable", "broken")
SIBLING_FINDINGS = ("lagging",)


class Step:
    """The next steps a verdict calls for, and what each asks of the reader."""

    DRAIN = "drain"
    FIX_THE_SUITE = "fix the suite"
    RERUN = "rerun"
    COMPARE = "compare with siblings"
    ACCEPT = "accept"
    OTHER_HOST = "accept this host or investigate"
    NOTHING = "nothing to do"


STEP_TEXT = {
    Step.DRAIN: "take the node out of service (its line in drain.txt: scontrol update nodename=NODE state=drain "
    "reason=...) and look at the path named",
    Step.FIX_THE_SUITE: "keep the node in service: the suite itself failed, not the node; fix what the SUITE ERROR "
    "says (a tool, the build, the disk), then run the night again",
    Step.RERUN: "run the night again when the GPUs are free: a busy GPU is not a slow one",
    Step.COMPARE: "set the node beside its siblings: a partition's night (./suite nightly --nodes all) tells one "
    "node from the fleet, and ./suite report compare --by time what changed and when",
    Step.ACCEPT: "once three nights or more of this kind of node, on separately started nodes, passed every check, "
    "make them its baseline (./suite accept STAMP STAMP STAMP --write-references)",
    Step.OTHER_HOST: "keep the node in service: it moved against accepted runs of another host (the host line "
    "says what differs), which the move may be owed to; make this host's nights its kind's baseline (./suite accept "
    "STAMP STAMP STAMP: they replace the accepted runs of its kind) or find why the host differs",
    Step.NOTHING: "keep the node in service",
}


# --- one sign ----------------------------------------------------------------


def worse_of_levels(levels, better: str) -> np.ndarray:
    """Worse-oriented log levels (a rate's fall, a time's rise positive) as % worse."""
    levels = np.asarray(levels, float)
    return (-np.expm1(-levels) if better == "higher" else np.expm1(levels)) * 100


def directions(table: pd.DataFrame, known: dict[str, str] | None = None) -> pd.Series:
    """Each row's direction ('higher' is better, or 'lower'): its own
    `better` column, else the path's in `known` (paths.csv's of the same
    night), else its kind of path (TIME_KINDS are times); '' where none says."""
    known = known or {}
    rows = table.to_dict("records")
    found = []
    for row in rows:
        own = row.get("better")
        if isinstance(own, str) and own:
            found.append(own)
        elif known.get(row.get("path"), ""):
            found.append(known[row["path"]])
        elif isinstance(row.get("kind"), str) and row["kind"]:
            found.append("lower" if row["kind"] in TIME_KINDS else "higher")
        else:
            found.append("")
    return pd.Series(found, index=table.index, dtype=object)


def _num(value) -> float:
    """A table's number, NaN where the table has none."""
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.nan


def _pct(value: float, digits: int = 1) -> str:
    """'+12.3%' / '-4.0%' of a % worse ('0.0%' where it rounds to zero)."""
    return f"{signed(value, digits)}%"


def _finite(value) -> bool:
    try:
        return value is not None and math.isfinite(float(value))
    except (TypeError, ValueError):
        return False


# --- the verdict against the accepted runs -------------------------------------

_ALONE = re.compile(r"moved alone: ([^;]*)")
_A_FIGURE = re.compile(r"a figure moved, the path did not: ([^;]*)")
_A_CASE = re.compile(r"a case moved: ([^;]*)")


def _cases_in_words(items: str) -> str:
    """'um_bandwidth memory=numa op=write first_run_bw -4.3%, um_bandwidth memory=numa op=write steady_bw -5.0%'
    -> 'um_bandwidth memory=numa op=write (2 figures, -4.3% to -5.0%)': each case once, its figures'
    internal names left out (compare.csv names them)."""
    cases: dict[str, list[str]] = {}
    for item in items.split(", "):
        words = item.split()
        if len(words) >= 3:
            cases.setdefault(" ".join(words[:-2]), []).append(words[-1])
    said = []
    for case, changes in cases.items():
        if len(changes) == 1:
            said.append(f"{case} ({changes[0]})")
        else:
            ordered = sorted(changes, key=lambda c: float(c.rstrip("%")))
            said.append(f"{case} ({len(changes)} figures, {ordered[0]} to {ordered[-1]})")
    return ("a case moved: " if len(said) == 1 else f"{len(said)} cases moved: ") + "; ".join(said)


_JUDGED_BY = re.compile(r"its path is judged by (\w+)")


def in_words(reason: str) -> str:
    """The judge's reason without the figures' internal names
    ('moved alone: path_matrix gpu1_h2d_allgpus_ce' names the figure that
    flagged a path of one figure: the path's name already says which)."""
    if not isinstance(reason, str):
        return ""

    def count(names: str) -> int:
        return len([n for n in names.split(",") if n.strip()])

    reason = _ALONE.sub(
        lambda m: "its one figure moved" if count(m[1]) == 1 else f"{count(m[1])} of its figures moved", reason
    )
    reason = _A_FIGURE.sub(
        lambda m: f"{count(m[1])} of its figures moved, the path as a whole did not (compare.csv names them)",
        reason,
    )
    reason = _A_CASE.sub(lambda m: _cases_in_words(m[1]), reason)
    return _JUDGED_BY.sub(lambda m: f"its path is judged by the {m[1]} check", reason)


def _holm_adjusted(paths: pd.DataFrame) -> pd.Series:
    """Each judged path's p-value after Holm's correction over the night's
    judged paths: paths.csv's own where it kept them, else made again."""
    if "p_adjusted" in paths.columns and paths["p_adjusted"].notna().any():
        return paths["p_adjusted"]
    judged = paths["p_worse"].notna() if "p_worse" in paths.columns else pd.Series(False, index=paths.index)
    adjusted = pd.Series(np.nan, index=paths.index)
    if judged.any():
        adjusted[judged] = holm(paths.loc[judged, "p_worse"].to_numpy(float))
    return adjusted


def explain_paths(paths: pd.DataFrame, alpha: float = ALPHA) -> pd.DataFrame:
    """paths.csv with each change as % worse (`worse_pct`, and `rerun_worse_pct`,
    `later_worse_pct` where the night measured again) and a reason for every
    path (`why`), in words."""
    paths = paths.copy()
    better = directions(paths)
    for key in ("", "rerun_", "later_"):
        if f"{key}change_pct" in paths.columns:
            paths[f"{key}worse_pct"] = worse_pct(paths[f"{key}change_pct"].astype(float), better)
    adjusted = _holm_adjusted(paths)
    judged = int(adjusted.notna().sum())
    paths["why"] = [
        _path_why(row, adjusted[index], judged, alpha) for index, row in zip(paths.index, paths.to_dict("records"))
    ]
    return paths


def flagged_by_words(flagged_by, statistics: str, row: dict | None = None) -> str:
    """What flagged a path (verdict's `flagged_by`: path, spread, guard,
    figures), in words: 'flagged by the statistics (...) and the guard rail
    (25%)'. `statistics` says what the statistics saw; a path's table from
    before the rules were named (no flagged_by) was flagged by them alone."""
    names = [n.strip() for n in str(flagged_by or "").split(";") if n.strip() and str(flagged_by) != "nan"]
    guard = _num((row or {}).get("guard_pct"))
    words = {
        "path": f"the statistics ({statistics})",
        "spread": "its samples' spread",
        "guard": f"the guard rail ({guard:g}% worse, whatever the spread)" if _finite(guard) else "the guard rail",
        "figures": "the cases named below, each moved beyond its own spread",
    }
    said = [words[n] for n in names if n in words] or [words["path"]]
    return "flagged by " + " and ".join(said)


def _path_why(row: dict, adjusted: float, judged: int, alpha: float) -> str:
    verdict, reason = row.get("verdict", ""), in_words(row.get("reason", ""))
    worse, floor, spread = (_num(row.get(k)) for k in ("worse_pct", "floor_pct", "spread_pct"))
    if verdict in ("unjudged", "yardstick", "broken") or not _finite(worse):
        return reason or ("not judged" if verdict != "yardstick" else "judged by another check")
    level = alpha / 2  # the paths' family's share of the night's alpha
    band = f"the accepted runs' spread of {spread:.1f}%" if _finite(spread) else "the accepted runs' spread"
    parts = []
    if verdict == "pass":
        if abs(worse) <= floor:
            parts.append(f"within the floor of {floor:g}%")
        elif worse < 0:
            chance = f" and not beyond chance (p {row['p_better']:.2g})" if _finite(row.get("p_better")) else ""
            parts.append(f"better, not worse{chance}: the verdict alarms on a path that got worse")
        elif _finite(row.get("p_worse")) and row["p_worse"] > level:
            parts.append(
                f"not beyond chance given {band} over {int(_num(row.get('runs')) or 0)} runs "
                f"(p {row['p_worse']:.2g}, {level:g} needed)"
            )
        elif _finite(adjusted):
            parts.append(
                f"not beyond chance with {judged} paths judged at once: p {row['p_worse']:.2g} alone, "
                f"{adjusted:.2g} after Holm's correction, {level:g} needed ({band})"
            )
        else:
            parts.append(f"within {band}")
    elif verdict == "improved":
        parts.append(f"better beyond {band}")
    elif verdict == "moved":
        floor_text = f"the floor of {floor:g}%" if _finite(floor) else "the floor"
        parts.append(flagged_by_words(row.get("flagged_by"), f"worse beyond {floor_text} and {band}", row))
    elif verdict == "unstable":
        parts.append(f"its samples spread {row.get('instability', math.nan):.1f} times the accepted runs'")
    elif verdict == "transient":
        parts.append("flagged, then gone when measured again")
    for key in ("rerun", "later"):
        again = row.get(f"{key}_worse_pct")
        if _finite(again) and verdict in ("moved", "unstable", "transient"):
            parts.append(f"{'its rerun' if key == 'rerun' else 'measured later'}: {_pct(again)}")
    if reason:
        parts.append(reason)
    return "; ".join(parts)


# --- each GPU against its siblings ---------------------------------------------


def explain_siblings(siblings: pd.DataFrame, paths: pd.DataFrame | None = None) -> pd.DataFrame:
    """siblings.csv with each lag as % worse than the siblings (`worse_pct`,
    `accepted_worse_pct`, `rerun_worse_pct`, `later_worse_pct`) and a reason
    for every row (`why`); the direction from `paths` (the same night's
    paths.csv) where the table does not keep it."""
    siblings = siblings.copy()
    known = dict(zip(paths["path"], paths["better"])) if paths is not None and "better" in paths.columns else {}
    better = directions(siblings, known)
    for key, column in (("", "vs_siblings_pct"), ("accepted_", "accepted_vs_siblings_pct")):
        if column in siblings.columns:
            siblings[f"{key}worse_pct"] = worse_pct(siblings[column].astype(float), better)
    for key in ("rerun", "later"):
        if f"{key}_vs_siblings_pct" in siblings.columns:
            siblings[f"{key}_worse_pct"] = worse_pct(siblings[f"{key}_vs_siblings_pct"].astype(float), better)
    siblings["why"] = [_sibling_why(row) for row in siblings.to_dict("records")]
    return siblings


def _sibling_why(row: dict) -> str:
    verdict, worse, floor = row.get("verdict", ""), _num(row.get("worse_pct")), _num(row.get("floor_pct"))
    reason = row.get("reason") if isinstance(row.get("reason"), str) else ""
    parts = []
    if not _finite(worse):
        return reason or "not judged"
    count = int(row.get("siblings") or 0)
    them = "its sibling" if count == 1 else f"its {count} siblings"
    if verdict == "lagging":
        parts.append(f"behind {them} beyond the floor of {floor:g}%, by {row.get('z', math.nan):.1f} standard errors")
    elif verdict == "transient":
        parts.append(f"behind {them} at first, not when measured again")
    elif pd.notna(row.get("as_accepted")) and bool(row["as_accepted"]):  # judge/siblings.py's as_accepted
        parts.append(f"behind {them}, but {row['reason']}")
    elif worse < -floor:
        parts.append(f"ahead of {them}, not behind")
    elif abs(worse) <= floor:
        parts.append(f"within the floor of {floor:g}%")
    else:
        parts.append(f"within 3 standard errors of {them} (z {row.get('z', math.nan):.1f})")
    for key in ("rerun", "later"):
        again = row.get(f"{key}_worse_pct")
        if _finite(again) and verdict in ("lagging", "transient"):
            parts.append(f"{'its rerun' if key == 'rerun' else 'measured later'}: {_pct(again)}")
    if isinstance(row.get("contended_by"), str) and row["contended_by"]:
        parts.append(f"another process used its GPUs or its host: {row['contended_by']}")
    return "; ".join(parts)


# --- the two judges side by side -------------------------------------------------


def side_by_side(paths: pd.DataFrame, siblings: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """explain_paths' and explain_siblings' tables, each with the other
    judge's verdict of the same path (`siblings_verdict`, `accepted_verdict`)
    and, where one flags the path and the other does not, why they differ,
    added to both rows' `why`."""
    paths, siblings = paths.copy(), siblings.copy()
    by_sibling = siblings.set_index("path") if not siblings.empty else None
    by_path = paths.set_index("path") if not paths.empty else None
    paths["siblings_verdict"] = [_short(by_sibling, p, "worse_pct") for p in paths["path"]]
    siblings["accepted_verdict"] = [_short(by_path, p, "worse_pct") for p in siblings["path"]]
    if by_sibling is None or by_path is None:
        return paths, siblings
    for index, path in zip(paths.index, paths["path"]):
        if path not in by_sibling.index:
            continue
        note = _differ(by_path.loc[path], by_sibling.loc[path])
        if note:
            paths.loc[index, "why"] = f"{paths.loc[index, 'why']}. {note[0]}"
            at = siblings.index[siblings["path"] == path]
            siblings.loc[at, "why"] = f"{siblings.loc[at[0], 'why']}. {note[1]}"
    return paths, siblings


def _short(table: pd.DataFrame | None, path: str, column: str) -> str:
    """'LAGGING +198.8%' / 'pass -0.3%' / '' : the other judge's verdict of the path."""
    if table is None or path not in table.index:
        return ""
    row = table.loc[path]
    verdict = str(row["verdict"])
    shown = verdict if verdict in ("pass", "yardstick") else verdict.upper()
    return f"{shown} {_pct(row[column])}" if _finite(row.get(column)) else shown


def _differ(path: pd.Series, sibling: pd.Series) -> tuple[str, str] | None:
    """Why the two judges of one path differ (for the path's row, for the
    sibling's), or None where they agree: both flag it, or neither does."""
    moved, lags = path["verdict"] in PATH_FINDINGS, sibling["verdict"] in SIBLING_FINDINGS
    if moved == lags:
        return None
    if lags:
        return (
            f"Against its sibling GPUs of the same night it is {_pct(sibling['worse_pct'])} worse, beyond the floor: "
            "a GPU behind the others of its node, measured in the same minutes, is the GPU's own, and the "
            "siblings' verdict stands",
            f"Against the accepted runs it {_passed(path)} ({_pct(path['worse_pct'])} worse): they judge the night as "
            "a whole, with the spread of separately started nodes; its siblings shared this night",
        )
    return (
        f"Its sibling GPUs moved with it ({_pct(sibling['worse_pct'])} worse than them): the node or its host "
        "moved, not this GPU alone",
        f"Against the accepted runs it is {str(path['verdict']).upper()} ({_pct(path['worse_pct'])} worse), as its "
        "siblings are: the whole node moved",
    )


def _passed(path: pd.Series) -> str:
    return {"transient": "found gone when measured again", "improved": "called improved"}.get(path["verdict"], "passed")


# --- findings and next steps -------------------------------------------------------


@dataclass
class Finding:
    """One thing a night found, in a line, and the step it calls for."""

    path: str
    verdict: str  # MOVED, LAGGING, UNSTABLE, BROKEN, CONTENDED, CHANGE, FAILED, SUITE ERROR
    line: str
    step: str  # a Step
    code: str = ""  # its code in systems/findings/codes.yaml, where the line does not start with it

    def said(self) -> str:
        """The line, its finding's code first."""
        return f"{self.code} {self.line}" if self.code and not self.line.startswith(self.code) else self.line


def findings(run: dict, paths: pd.DataFrame | None, siblings: pd.DataFrame | None) -> list[Finding]:
    """What the night found (failed checks, GPUs behind their siblings, paths
    moved, changes held over the nights), one line a path with both judges'
    words where both flag it, each with its next step; from explain_paths'
    and explain_siblings' tables (either may be None or empty)."""
    none = pd.DataFrame(columns=["path", "verdict", "worse_pct", "gpus", "z"])
    paths = paths if paths is not None and not paths.empty else none
    siblings = siblings if siblings is not None and not siblings.empty else none
    found = [Finding("", "FAILED", line, Step.DRAIN) for line in failed_checks(run.get("drain") or [])]
    suite = code_of("night", "suite-error").code
    found += [Finding("", "SUITE ERROR", line, Step.FIX_THE_SUITE, suite) for line in run.get("suite_errors") or []]
    contended = {}
    for table in (siblings, paths):
        if "contended_by" in table.columns:
            contended.update({p: c for p, c in zip(table["path"], table["contended_by"]) if isinstance(c, str) and c})
    lags = siblings[siblings["verdict"].isin(SIBLING_FINDINGS)]
    moved = paths[paths["verdict"].isin(PATH_FINDINGS)].set_index("path")
    judged = paths[paths["verdict"].isin(["pass", "transient", "improved"])].set_index("path")
    with_siblings = set(siblings["path"])
    # Moved against accepted runs of another host: the host's, maybe, not the node's (runner/nightly.py's other_host).
    moved_step = Step.OTHER_HOST if "other-host" in (run.get("unjudged_reasons") or []) else Step.DRAIN
    for row in lags.sort_values("z", ascending=False).itertuples():
        by = contended.get(row.path, "")
        parts = [f"{_pct(row.worse_pct)} against its siblings"]
        if row.path in moved.index and _finite(moved.loc[row.path, "worse_pct"]):
            parts.append(f"{_pct(moved.loc[row.path, 'worse_pct'])} against the accepted runs")
        elif row.path in judged.index and _finite(judged.loc[row.path, "worse_pct"]):
            other = judged.loc[row.path]
            parts.append(f"{_pct(other['worse_pct'])} against the accepted runs, which {_passed(other)} it (why below)")
        verdict = (
            "CONTENDED"
            if by
            else "LAGGING" + (f" and {moved.loc[row.path, 'verdict'].upper()}" if row.path in moved.index else "")
        )
        code = code_of("sibling", "lagging").code
        line = f"{row.path}: {'; '.join(parts)}" + (f"; {by}" if by else "")
        found.append(Finding(row.path, verdict, line, _step(by), code))
    for path, row in moved.drop(index=[p for p in lags["path"] if p in moved.index]).iterrows():
        by = contended.get(path, "")
        change = f"{_pct(row['worse_pct'])} against the accepted runs" if _finite(row["worse_pct"]) else "broken"
        alike = (
            "; its sibling GPUs moved alike: the node or its host moved, compare it with other nodes"
            if path in with_siblings
            else ""
        )
        verdict = "CONTENDED" if by else str(row["verdict"]).upper()
        step = Step.RERUN if by else moved_step
        code = code_of("path", row["verdict"]).code
        found.append(Finding(path, verdict, f"{path}: {change}{alike}" + (f"; {by}" if by else ""), step, code))
    for change in run.get("changes") or []:
        found.append(Finding("", "CHANGE", change, Step.COMPARE))
    return found


def _step(contended_by: str) -> str:
    return Step.RERUN if contended_by else Step.DRAIN


def next_step(run: dict, found: list[Finding], accepted: set[str] | None = None) -> tuple[str, str]:
    """The night's next step (a Step) and what it asks, in a sentence: the
    first of drain, rerun, compare and accept that its exit status and
    findings call for; nothing where it is as accepted. `accepted`, where
    given, is the stamps its kind's baseline holds now (a night drawn again
    later): a night not judged for want of them is judged again, or is one of them."""
    status, reasons = run.get("exit"), run.get("unjudged_reasons") or []
    if accepted is not None and status == 3 and {"no-baseline", "other-kind"} & set(reasons):
        if run.get("stamp") in accepted:
            return Step.NOTHING, "it has since become one of its kind's accepted runs"
        return Step.RERUN, f"its kind has accepted runs now: judge it against them (./suite rejudge {run['stamp']})"
    steps = {f.step for f in found}
    drill = " (a drill: the fault was planted; this is what a real night would call for)" if run.get("drill") else ""
    if status == 1 or Step.DRAIN in steps:
        if status == 1 and not found:
            return Step.DRAIN, "take the node out of service: a check failed or the node is unhealthy" + drill
        return Step.DRAIN, STEP_TEXT[Step.DRAIN] + drill
    if Step.FIX_THE_SUITE in steps or (status == 3 and "suite-error" in reasons):
        return Step.FIX_THE_SUITE, STEP_TEXT[Step.FIX_THE_SUITE]
    if status == 3 and "other-host" in reasons:
        return Step.OTHER_HOST, STEP_TEXT[Step.OTHER_HOST]
    if Step.RERUN in steps:
        return Step.RERUN, STEP_TEXT[Step.RERUN] + drill
    if Step.COMPARE in steps:
        return Step.COMPARE, STEP_TEXT[Step.COMPARE] + drill
    if status == 3 and {"no-baseline", "other-kind"} & set(reasons):
        return Step.ACCEPT, STEP_TEXT[Step.ACCEPT]
    if status == 3 and "vanished" in reasons:
        return Step.RERUN, "run the night again with every check: figures the accepted runs have were not measured"
    if status == 3:
        return Step.ACCEPT, "see why each figure was not judged (compare.csv), then accept nights that judge it"
    return Step.NOTHING, STEP_TEXT[Step.NOTHING]


# --- a partition's night ------------------------------------------------------------


def cell_worse(cells: pd.DataFrame) -> pd.Series:
    """Each node's % worse than its siblings on a path: cells.csv's
    `worse_pct`, or, in a table written before it, from `vs_siblings_pct`
    and `behind_pct` (the same move as a value's change and as the log's:
    they are equal for a time, and differ for a rate unless nothing moved)."""
    if "worse_pct" in cells.columns:
        return cells["worse_pct"].astype(float)
    vs, behind = cells["vs_siblings_pct"].astype(float), cells["behind_pct"].astype(float)
    return behind.where(np.isclose(vs, behind, rtol=1e-6, atol=1e-9), -vs)


#: A partition's cells that named their node: behind its siblings, alone or on a path the partition moved on.
NAMED = ("node fault", "both")


def fleet_worse(fleet: pd.DataFrame) -> pd.Series:
    """Each path's median move over the partition as % worse: fleet.csv's
    `worse_pct`, or, in a table written before it, `change_pct` turned round
    where the path is a rate (TIME_KINDS are not; the fleet has no kind column
    then: its paths' names say 'latency')."""
    if "worse_pct" in fleet.columns:
        return fleet["worse_pct"].astype(float)
    times = fleet["path"].str.contains("latency|small copies", regex=True)
    return fleet["change_pct"].astype(float).where(times, -fleet["change_pct"].astype(float))


def partition_findings(run: dict, cells: pd.DataFrame, fleet: pd.DataFrame, limit: int = 2) -> list[Finding]:
    """What a partition's night found, from its tables: each node to drain
    (its worst `limit` paths behind its siblings, as % worse), each node
    behind while another process used its GPUs, each fleet change."""
    cells = cells.assign(worse=cell_worse(cells))
    found = []
    for row in run.get("drain") or []:
        node = row["node"]
        mine = cells[(cells["node"] == node) & cells["verdict"].isin([*NAMED, "not measured"])]
        mine = mine.sort_values("z", ascending=False)
        words = [
            f"{c.path} not measured" if c.verdict == "not measured" else f"{c.path} {_pct(c.worse)} (z {c.z:.0f})"
            for c in mine.head(limit).itertuples()
        ]
        more = f" and {len(mine) - limit} more" if len(mine) > limit else ""
        failed = [f"failed {line}" for line in failed_checks(row.get("reasons", []))]
        if row.get("state") == "did not report":
            line = f"{node}: did not report"
        elif words:
            line = f"{node}: behind its siblings on {'; '.join(words)}{more}"
        else:
            line = f"{node}: {'; '.join(failed) or row.get('state', '')}"
        state = row.get("state", "")
        code = code_of("node-state", state).code if ("node-state", state) in catalogue() else ""
        found.append(Finding("", "DRAIN", line, Step.DRAIN, code))
    for row in run.get("not_drained") or []:
        line = f"{row['node']}: behind its siblings, its GPUs shared"
        found.append(Finding("", "CONTENDED", line, Step.RERUN, code_of("node-state", line.partition(": ")[2]).code))
    changes = fleet.assign(worse=fleet_worse(fleet))
    for row in changes[changes["verdict"] == "fleet change"].itertuples():
        line = f"{row.path}: {_pct(row.worse)} on the whole partition ({int(row.nodes)} nodes)"
        found.append(Finding(row.path, "FLEET CHANGE", line, Step.COMPARE, code_of("fleet", "fleet change").code))
    return found


def partition_next_step(run: dict) -> tuple[str, str]:
    """A partition's night's next step, from its run.json."""
    if run.get("drain"):
        nodes = ", ".join(r["node"] for r in run["drain"])
        return (
            Step.DRAIN,
            f"take {nodes} out of service (drain.txt: a node and its reasons per line), and look at the paths named",
        )
    if run.get("not_drained"):
        return Step.RERUN, "measure the contended nodes again when their GPUs are free: a busy node is not a slow one"
    if run.get("fleet_changes"):
        return (
            Step.COMPARE,
            "every node moved alike: compare the nights by driver, CUDA or time (./suite report compare --by "
            "driver_version|cuda_version|time) to find what changed for the whole partition",
        )
    if run.get("exit") == 3:
        return Step.ACCEPT, STEP_TEXT[Step.ACCEPT]
    return Step.NOTHING, "keep the partition's nodes in service"
