"""The counts docs/ states of how far the verdict is measured (the in-short lists of docs/verdict.md, its
test bench, power and partition passages, docs/nightly.md's partition, docs/upgrade.md's replay) equal what
the committed results give: the replays' outputs under results/replays/, the power tables under
results/power/, and the nights' own logs and folders. A page that keeps an old count after its results were
measured again fails here, naming the sentence the results now give (the counts are said once: in the
results; the pages quote them). The H200 pair's neighbour night (30 of the 32 paths it slowed) is judged
again from the committed perflogs by tests/test_nightly.py; counts elsewhere in docs/ (the four-GPU
passages, the tables of each night, the upgrades measured on GPUs) are not read yet."""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import pytest

from judge import status, verdict

REPO = Path(__file__).resolve().parent.parent
REPLAYS = REPO / "results" / "replays"
LOGS = REPO / "perflogs" / "hopper-vm" / "logs"
VERDICT = REPO / "docs" / "verdict.md"


def prose(path: Path) -> str:
    """A page's text with its line breaks and runs of spaces as single spaces: a sentence wraps anywhere."""
    return re.sub(r"\s+", " ", path.read_text())


@dataclass
class ReplayedNight:
    exit: int
    first: list[str]
    confirmed: list[str]
    not_rerun: list[str] | None


@dataclass
class Replay:
    """What `python -m runner.replay` printed for one kind: each committed night replayed whole, the clean
    nights drawn path by path, and per path the nights with a planted 7% move and spread x10."""

    nights: dict[str, ReplayedNight] = field(default_factory=dict)
    drawn: int = 0
    drawn_first: int = 0
    drawn_exit_2: int = 0
    drawn_flagged: list[str] = field(default_factory=list)  # the paths the drawn nights exit 2 on
    caught: dict[str, int] = field(default_factory=dict)  # path -> nights of 20 a 7% move is caught in
    unstable: dict[str, int] = field(default_factory=dict)  # path -> nights of 20 a x10 spread is unstable in

    def whole(self, code: int) -> int:
        """The committed nights replayed whole that exit `code`."""
        return sum(night.exit == code for night in self.nights.values())

    def first_flagged(self) -> int:
        """The committed nights that flag a path on their first run."""
        return sum(bool(night.first) for night in self.nights.values())

    def unconfirmed(self) -> int:
        """The nights that exit 2 on flags alone their reruns never measured (a night run now reruns them)."""
        return len(self.unconfirmed_nights())

    def unconfirmed_nights(self) -> list[str]:
        """The stamps of the nights `unconfirmed` counts."""
        assert all(night.not_rerun is not None for night in self.nights.values()), "printed before 'not rerun'"
        moved = {stamp: n for stamp, n in self.nights.items() if n.exit == status.MOVED}
        return [stamp for stamp, night in moved.items() if set(night.confirmed) <= set(night.not_rerun)]


NIGHT = re.compile(r"^(\S+) exit (\d): first (\[.*?\]), confirmed (\[.*?\])(?:, not rerun (\[.*?\]))?$")
DRAWN = re.compile(r"^clean: (\d+) nights, flagged on the first run (\d+), exit 2 (\d+): (\[.*\])$")
PLANTED = re.compile(r"^(.+): 7% caught (\d+)/20, x10 spread unstable (\d+)/20$")


def replays(name: str) -> list[Replay]:
    """results/replays/NAME read back, one Replay per block (a blank line apart: the replay run with its
    command, then others, each under its own comment)."""
    found = []
    for block in REPLAYS.joinpath(name).read_text().split("\n\n"):
        replay = Replay()
        for line in block.splitlines():
            if night := NIGHT.match(line):
                stamp, code, first, confirmed, not_rerun = night.groups()
                unknown = not_rerun is None  # printed before the replay named them
                flags = ast.literal_eval(first), ast.literal_eval(confirmed)
                replay.nights[stamp] = ReplayedNight(
                    int(code), *flags, None if unknown else ast.literal_eval(not_rerun)
                )
            elif drawn := DRAWN.match(line):
                replay.drawn, replay.drawn_first, replay.drawn_exit_2 = map(int, drawn.groups()[:3])
                replay.drawn_flagged = [path for night in ast.literal_eval(drawn[4]) for path in night]
            elif planted := PLANTED.match(line):
                replay.caught[planted[1]], replay.unstable[planted[1]] = int(planted[2]), int(planted[3])
        found.append(replay)
    return found


@pytest.fixture(scope="module")
def h100() -> tuple[Replay, Replay]:
    """One H100's committed nights replayed with the verdict's rules of now: every night, then the nights
    but the two slow hosts' (22:34 and 22:49, their clean nights drawn with another seed)."""
    every, without_slow = replays("hopper-vm-h100.txt")[:2]
    return every, without_slow


@pytest.fixture(scope="module")
def h100_before() -> tuple[Replay, Replay]:
    """The same, with the statistics alone (2026-11-28): the figures the pages give in brackets."""
    every, without_slow = replays("hopper-vm-h100-2026-11-28.txt")[:2]
    return every, without_slow


@pytest.fixture(scope="module")
def verdict_page() -> str:
    return prose(VERDICT)


def states(page: str, sentence: str, where: str = "docs/verdict.md") -> None:
    assert sentence in page, f"{where} does not say what the committed results give: {sentence!r}"


# --- nights on real GPUs, from their committed logs and folders ---------------------------------------------

NIGHTS = REPO / "results" / "nightly" / "hopper-vm"


def night_of(log: Path) -> Path | None:
    """The committed folder of the night a log (NAME-2026-11-28T1954.txt) is the output of; None for a
    night the machine's limit cut before it wrote one (nothing judged: not counted)."""
    named = re.search(r"(\d{4}-\d\d-\d\dT\d{4})", log.name)
    assert named, f"{log.name}: no night's stamp in its name"
    stamp = named[1]
    folders = list(NIGHTS.glob(f"{stamp}*/run.json"))
    assert len(folders) <= 1, f"{log.name}: more than one night started at {stamp}"
    return folders[0].parent if folders else None


def judged(*patterns: str) -> list[int]:
    """The exit status, as the nightly judges them now, of the committed nights whose logs match `patterns`
    and that were judged against accepted runs (a kind's first nights, before its baseline, exit 3)."""
    logs = sorted({log for pattern in patterns for log in LOGS.glob(pattern)})
    exits = [as_judged_now(folder) for folder in map(night_of, logs) if folder is not None]
    return [code for code in exits if code != status.UNJUDGED]


def as_judged_now(folder: Path) -> int:
    """A night's exit status as the nightly judges it now: its verdict judged again where it was
    (`./suite rejudge`: rejudged-paths.csv, rejudged-siblings.csv), else its own."""
    if not (folder / "rejudged-paths.csv").exists():
        return int(json.loads((folder / "run.json").read_text())["exit"])
    paths = pd.read_csv(folder / "rejudged-paths.csv")
    sibling = pd.read_csv(folder / "rejudged-siblings.csv")
    flagged = paths["verdict"].isin(verdict.FLAGGED).any() or (sibling["verdict"] == "lagging").any()
    return status.MOVED if flagged else status.AS_ACCEPTED


def test_the_clean_nights_on_freshly_started_nodes_are_counted_as_their_results_give(verdict_page):
    four = judged("nightly-clean-h200x4-*.txt", "nightly-judged-h200x4-*.txt")
    states(verdict_page, f"four H200s: {four.count(0)} of {len(four)} exit 0")
    pair = judged("nightly-judged-h200-pair-*.txt")
    states(verdict_page, f"two H200s: {pair.count(0)} of {len(pair)}, against its first three runs")
    one = judged("nightly-clean-h200x1-*.txt", "nightly-h200x1-fourth-*.txt")
    states(verdict_page, f"one H200: {one.count(0)} of {len(one)}, against its three accepted runs")
    states(verdict_page, f"{one.count(0)} of {len(one)} clean nights of one H200 exit 0 against its three")
    evening = judged("nightly-clean-h200x1-2026-11-28T*.txt", "nightly-h200x1-fourth-*.txt")
    states(verdict_page, f"With 11:52, {evening.count(0)} of {len(evening)} clean nights of the kind exit 0")


def neighbour_nights(pattern: str) -> list[tuple[bool, bool]]:
    """For each committed night with a neighbour copying through one GPU's host link (its GPU in its log's
    name, 'neighbour-gpu2'): whether the siblings named that GPU alone, and whether the night drained."""
    found = []
    for log in sorted(LOGS.glob(pattern)):
        gpu = re.search(r"neighbour-gpu(\d)", log.name)[1]
        if (folder := night_of(log)) is None:
            continue
        sibling = pd.read_csv(folder / "siblings.csv", dtype={"gpus": str})
        named = set(sibling.loc[sibling["verdict"] == "lagging", "gpus"])
        drained = bool(json.loads((folder / "run.json").read_text()).get("drain"))
        found.append((named == {gpu}, drained))
    return found


def test_a_neighbour_on_one_gpu_is_counted_as_its_nights_give(verdict_page):
    h200 = neighbour_nights("nightly-neighbour-gpu?-h200x4-*.txt")
    h100 = neighbour_nights("nightly-neighbour-gpu?-path_matrix-h100x4-*.txt")
    alone = f"{sum(a for a, _ in h200)} of {len(h200)} nights of four H200s, {sum(a for a, _ in h100)} of {len(h100)}"
    states(verdict_page, f"is named on that GPU alone against its siblings: {alone} of four H100s")
    kept = f"{sum(not d for _, d in h200)} of the {len(h200)} and {sum(not d for _, d in h100)} of {len(h100)}"
    states(verdict_page, f"CONTENDED and not drained in {kept}")


WORDS = dict(enumerate(["no", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]))


def caught(pattern: str) -> str:
    """A planted neighbour's nights as the in-short list says them: '1 of 1: exit 2, five host-link paths,
    contended' (each of its flagged paths contended, nothing drained)."""
    said = []
    for folder in filter(None, map(night_of, sorted(LOGS.glob(pattern)))):
        run = json.loads((folder / "run.json").read_text())
        paths = pd.read_csv(folder / "paths.csv")
        flagged = set(paths.loc[paths["verdict"].isin(verdict.FLAGGED), "path"])
        contended = flagged <= set((run.get("contention") or {}).get("paths", {})) and not run.get("drain")
        host_link = all(path.startswith("host link ") for path in flagged)
        said.append(
            f"exit {run['exit']}, {WORDS[len(flagged)]} {'host-link ' if host_link else ''}paths"
            + (", contended" if contended else "")
        )
    assert len(set(said)) == 1, f"{pattern}: nights unlike each other, said one way: {said}"
    return f"{len(said)} of {len(said)}: {said[0]}"


def test_a_neighbour_inside_one_h200_is_counted_as_its_night_gives(verdict_page):
    states(verdict_page, f"({caught('nightly-neighbour-hbm-gpu0-h200x1-*.txt')}), though DAXPY")
    states(verdict_page, f"({caught('nightly-neighbour-hostlink-half-gpu0-h200x1-*.txt')}); every path it slowed")


# --- the power tables --------------------------------------------------------------------------------------

POWER = REPO / "results" / "power"


def power(kind: str, rules: str) -> pd.DataFrame:
    """`./suite power` of one kind under one set of the verdict's rules (results/power/...-rules-RULES.csv)."""
    return pd.read_csv(POWER / f"hopper-vm-{kind}-rules-{rules}.csv")


def test_what_the_guard_rail_and_one_case_alone_buy_is_as_the_power_tables_give(verdict_page):
    """docs/verdict.md: 'take a 50% move from 8 of 22 paths to 22 of 22 on one H100 and from 11 to 22 on
    one H200, on the bench; the clean bench nights flag no more (1 against 2 ...)'."""
    caught = {
        (k, r): int((power(k, r)["bench_power_50"] >= 0.9).sum())
        for k in ("h100", "h200")
        for r in ("statistics", "all")
    }
    paths = len(power("h100", "all"))
    states(
        verdict_page,
        f"take a 50% move from {caught['h100', 'statistics']} of {paths} paths to {caught['h100', 'all']} of {paths} "
        f"on one H100 and from {caught['h200', 'statistics']} to {caught['h200', 'all']} on one H200, on the bench",
    )
    false = {(k, r): int(power(k, r)["bench_false"].sum()) for k in ("h100", "h200") for r in ("statistics", "all")}
    states(
        verdict_page,
        f"({false['h100', 'all']} against {false['h100', 'statistics']} on the H100, {false['h200', 'all']} and "
        f"{false['h200', 'statistics']} on the H200)",
    )
    sim = {(k, r): int(power(k, r)["sim_false"].sum()) for k in ("h100", "h200") for r in ("statistics", "all")}
    nights = int(power("h100", "all")["sim_nights"].iloc[0])
    states(
        verdict_page,
        f"({sim['h100', 'all']} paths in {nights} nights on the H100 against {sim['h100', 'statistics']}; "
        f"{sim['h200', 'all']} against {sim['h200', 'statistics']} on the H200)",
    )


# --- one H100's committed nights replayed --------------------------------------------------------------------


def span(counts: list[int]) -> str:
    """'17-20', or '4' where every count is one."""
    return f"{min(counts)}-{max(counts)}" if min(counts) != max(counts) else f"{min(counts)}"


def of_paths(counts: dict[str, int], *starts: str, but: str | None = None) -> list[int]:
    """The counts of the paths whose names start with any of `starts` (not containing `but`)."""
    return [n for path, n in counts.items() if path.startswith(starts) and not (but and but in path)]


def test_one_h100s_nights_replayed_whole_are_counted_as_the_replay_gives(h100, h100_before, verdict_page):
    (every, _), (before, _) = h100, h100_before
    nights, moved = len(every.nights), every.whole(status.MOVED)
    assert set(every.nights) == set(before.nights) and every.whole(1) == every.whole(3) == 0
    slow, unconfirmed = moved - every.unconfirmed(), every.unconfirmed()
    moved_nights = {stamp for stamp, night in every.nights.items() if night.exit == status.MOVED}
    assert moved_nights - set(every.unconfirmed_nights()) == {"2026-11-24T22:34:55", "2026-11-24T22:49:45"}
    bench = verdict_page[verdict_page.index("**Clean nights, replayed whole**") :][:1200]
    for stamp in every.unconfirmed_nights():
        assert stamp[11:16] in bench, f"docs/verdict.md's test bench does not name {stamp}, unconfirmed"
    states(
        verdict_page,
        f"its {nights} committed clean nights replayed, {every.whole(0)} exit 0 and {moved} exit 2: "
        f"{WORDS[slow]} hosts slow through their reruns, and {WORDS[unconfirmed]} on flags their nights' reruns "
        "never measured",
    )
    states(verdict_page, f"**Clean nights, replayed whole**: {moved} of {nights} exit 2 ({before.whole(2)})")
    states(
        verdict_page, f"{every.first_flagged()} of {nights} flag a path on their first run ({before.first_flagged()})"
    )
    states(
        verdict_page,
        f"{before.first_flagged()} of {nights} nights flag a path before any rerun, against "
        f"{every.first_flagged()} of {nights} with the guard rail and one case alone",
    )


def test_one_h100s_drawn_nights_are_counted_as_the_replay_gives(h100, h100_before, verdict_page):
    (every, without_slow), (before, without_slow_before) = h100, h100_before
    assert every.drawn == without_slow.drawn == 200 and all(
        path.startswith("host link ") for path in every.drawn_flagged
    )
    states(
        verdict_page,
        f"**200 clean nights drawn from them**: {every.drawn_exit_2} exit 2 ({before.drawn_exit_2}), on host-link "
        f"paths, {every.drawn_first} flagged on the first run ({before.drawn_first})",
    )
    states(
        verdict_page,
        f"left out, {without_slow.drawn_exit_2} of 200 exit 2 ({without_slow_before.drawn_exit_2}), "
        f"{without_slow.drawn_first} flagged on the first run ({without_slow_before.drawn_first}); the one on "
        f"{without_slow.drawn_flagged[0].split(', GPU')[0]}",
    )
    states(verdict_page, f"exit 2 in {every.drawn_exit_2}, on host-link paths")
    assert len(without_slow.drawn_flagged) == without_slow.drawn_exit_2 == 1
    states(
        verdict_page,
        f"left out (another seed), {without_slow.drawn_exit_2} of 200 ({without_slow_before.drawn_exit_2})",
    )


def test_faults_planted_in_one_h100s_nights_are_counted_as_the_replay_gives(h100, h100_before, verdict_page):
    (every, _), (before, _) = h100, h100_before
    now, then = every.caught, before.caught
    full = ["GPU memory of GPU 0", "host link d2h of GPU 0, ce", "host link d2h of GPU 0, sm"]
    assert all(now[path] == 20 for path in full), {path: now[path] for path in full}
    others = {
        "h2d by the SMs": "host link h2d of GPU 0, sm",
        "both ways by the copy engine": "host link both ways of GPU 0, ce",
        "both ways by the SMs": "host link both ways of GPU 0, sm",
        "h2d by the copy engine": "host link h2d of GPU 0, ce",
    }
    rest = ", ".join(f"{now[path]} on {name} ({then[path]})" for name, path in others.items())
    states(verdict_page, f"caught in 20 of 20 on GPU memory and on the host link's d2h by either engine; {rest}")
    missed = of_paths(now, "host link latency", "DAXPY", "Unified Memory", "host memory", "small copies")
    assert set(missed) == {0}
    other = [now[path] for path in others.values()]
    states(verdict_page, f"20 of 20 on GPU memory and two host-link paths; {span(other)} on the other four")
    states(
        verdict_page,
        "a 7% move of GPU memory or of the host link d2h, planted in replayed nights of one H100: 20 of 20",
    )


def test_samples_spread_wider_in_one_h100s_nights_are_counted_as_the_replay_gives(h100, h100_before, verdict_page):
    (every, _), (before, _) = h100, h100_before

    def spans(unstable: dict[str, int]) -> tuple[str, ...]:
        return (
            span(of_paths(unstable, "DAXPY", "Unified Memory")),
            span(of_paths(unstable, "host memory", "small copies")),
            span(of_paths(unstable, "host link", but="latency")),
            span(of_paths(unstable, "host link latency")),
        )

    (kernels, host, link, latency), (kernels_then, host_then, link_then, latency_then) = (
        spans(every.unstable),
        spans(before.unstable),
    )
    states(
        verdict_page,
        f"unstable in {kernels} of 20 on DAXPY and migration, {host} on host memory and small copies, {link} on "
        f"the host link and {latency} on its latency (with the statistics alone: {kernels_then}, {host_then}, "
        f"{link_then}, {latency_then})",
    )
    states(
        verdict_page,
        f"unstable in {kernels} of 20 on DAXPY and migration, {host} on host memory and small copies, {link} on "
        "the host link |",
    )


# --- one H100's nights as one partition's nodes ----------------------------------------------------------------


def test_a_partition_of_one_h100s_nights_is_counted_as_the_replay_gives(verdict_page):
    power = REPLAYS.joinpath("hopper-vm-partition-power-h100.txt").read_text()
    half = re.search(r"^a node at 0.5 of its speed named in every partition: on (\d+) of (\d+) paths$", power, re.M)
    quarter = re.search(
        r"^a node at 0.75 of its speed named in .*: on (\d+) of (\d+) paths of those spread", power, re.M
    )
    draws = set(re.findall(r"^\s+\S.*?\s+[\d.]+\s+(\d+)\s+\d+\s+\d+", power, re.M))
    assert half and quarter and len(draws) == 1, "results/replays/hopper-vm-partition-power-h100.txt: unreadable"
    [partitions] = draws
    states(
        verdict_page,
        f"half as fast named in {partitions} of {partitions} partitions on {half[1]} of {half[2]} paths, a quarter "
        f"slower on {quarter[1]} of the {quarter[2]} paths spread under 5% between nodes",
    )
    night = REPLAYS.joinpath("hopper-vm-partition.txt").read_text()
    faults = set(re.findall(r"^  (2026\S+) .*: node fault$", night, re.M))
    transients = set(re.findall(r"^  (2026\S+) .*: transient$", night, re.M))
    assert faults == {"2026-11-24T22:34:55"} and transients == {"2026-11-24T22:49:45"}, (faults, transients)
    assert "fleet changes []" in night
    h2d = re.search(r"22:34:55 host link h2d of GPU 0, sm: -([\d.]+)% vs siblings \(z ([\d.]+)\)", night)
    assert h2d, "results/replays/hopper-vm-partition.txt: no line of 22:34's h2d by the SMs"
    states(
        prose(REPO / "docs" / "nightly.md"),
        f"judged as one partition name 22:34 alone (host link h2d −{round(float(h2d[1]))}%, z {int(float(h2d[2]))}, "
        "its rerun agreeing), 22:49's one flag cleared by its rerun, no fleet change",
        "docs/nightly.md",
    )


def test_the_power_the_accepted_runs_give_is_as_the_power_tables_give(verdict_page):
    """`./suite power` of one H100's nine accepted runs and of the H200 pair's six: the paths that see a
    move in 90% of simulated nights, and the clean simulated nights they flag."""
    h100 = pd.read_csv(POWER / "hopper-vm-h100.csv")
    seen = int((h100["sim_power_10"] >= 0.9).sum())
    states(verdict_page, f"| {len(h100)} paths | {seen} paths flag it in 90% of nights |")
    pair = pd.read_csv(POWER / "hopper-vm-h200-pair.csv")
    see = {move: int((pair[f"sim_power_{move}"] >= 0.9).sum()) for move in (7, 10, 25)}
    false = "none" if pair["sim_false"].sum() == 0 else str(int(pair["sim_false"].sum()))
    states(
        verdict_page,
        f"{see[10]} see 10%, {see[7]} see 7%, {see[25]} 25%; {false} falsely flagged in "
        f"{int(pair['sim_nights'].iloc[0])} simulated nights",
    )


# --- upgrades replayed ---------------------------------------------------------------------------------------

UPGRADE = re.compile(r"^(.+): 7% caught (\d+)/20 \(figures moved: .*\), 40% in one new run called moved (\d+)/20$")


def upgrade_replay(stamp: str) -> tuple[int, dict[str, int], dict[str, int]]:
    """results/replays/hopper-vm-upgrade-13.0-to-13.5-STAMP.txt: (unchanged upgrades flagged, per path the
    7% drops caught and the one-run 40% drops called moved)."""
    text = REPLAYS.joinpath(f"hopper-vm-upgrade-13.0-to-13.5-{stamp}.txt").read_text()
    flagged = re.search(r"^nothing changed: 200 upgrades, flagged (\d+):", text, re.M)
    assert flagged, f"{stamp}: no line of the unchanged upgrades"
    rows = [UPGRADE.match(line) for line in text.splitlines()]
    caught = {row[1]: int(row[2]) for row in rows if row}
    alone = {row[1]: int(row[3]) for row in rows if row}
    return int(flagged[1]), caught, alone


def test_the_upgrades_replayed_are_counted_as_the_replay_gives():
    page = prose(REPO / "docs" / "upgrade.md")
    reprex, (flagged, caught, alone) = upgrade_replay("2026-11-26T024617"), upgrade_replay("2026-11-26T025359")
    states(
        page,
        f"| 200 upgrades that change nothing: flagged | {reprex[0]} (4 under the first instability rule, all host "
        f"memory read) | {flagged} |",
        "docs/upgrade.md",
    )
    one = reprex[1]
    states(
        page,
        f"host link d2h by SMs {one['host link d2h of GPU 0, sm']}, GPU memory {one['GPU memory of GPU 0']}, host link "
        f"h2d by SMs {one['host link h2d of GPU 0, sm']}; the migration and host memory "
        f"{span(of_paths(one, 'Unified Memory', 'host memory'))} |",
        "docs/upgrade.md",
    )
    states(
        page,
        f"host link d2h by copy engine {caught['host link d2h of GPU 0, ce']}, h2d by SMs "
        f"{caught['host link h2d of GPU 0, sm']}, h2d by copy engine {caught['host link h2d of GPU 0, ce']}; both ways "
        f"{span(of_paths(caught, 'host link both ways'))}, d2h by SMs {caught['host link d2h of GPU 0, sm']}; DAXPY, "
        f"the latency, small copies {span(of_paths(caught, 'DAXPY', 'host link latency', 'small copies'))} |",
        "docs/upgrade.md",
    )
    assert set(alone.values()) == set(reprex[2].values()) == {0}
    states(page, "| 40% in one new run alone, 20 a path: called moved | 0 on every path | 0 on every path |")


def partition_power(name: str) -> tuple[str, str, str]:
    """results/replays/NAME's three summary lines as docs/verdict.md's partition table says them: (half as
    fast: 'N of M', a quarter slower: 'N of M', nothing planted: 'N of 440' and who)."""
    text = REPLAYS.joinpath(name).read_text()
    half = re.search(r"^a node at 0.5 of its speed named in every partition: on (\d+ of \d+) paths$", text, re.M)
    quarter = re.search(r"^a node at 0.75 of its speed named in .*: on (\d+ of \d+) paths of those spread", text, re.M)
    clean = re.search(r"^nothing planted, a node named: in (\d+ of \d+) partitions \((.*)\)$", text, re.M)
    assert half and quarter and clean, f"results/replays/{name}: its summary lines unreadable"
    who = ", ".join(f"{stamp[11:16]} in {n}" for stamp, n in re.findall(r"(\S+) in (\d+)", clean[2]))
    return half[1], quarter[1], f"{clean[1]}" + (f": {who}" if who else "")


def test_the_partition_table_is_as_the_replays_give(verdict_page):
    before = partition_power("hopper-vm-partition-power-h100-before.txt")
    now = partition_power("hopper-vm-partition-power-h100.txt")
    h200 = partition_power("hopper-vm-partition-power-h200.txt")
    states(verdict_page, f"| {before[0]} paths | {before[1]} | {before[2].replace(' of 440', ' of 440 partitions')} |")
    states(verdict_page, f"| the same, with them (nine runs) | {now[0]} | {now[1]} | {now[2]} |")
    states(verdict_page, f"(three runs: they add no degree of freedom) | {h200[0]} | {h200[1]} | {h200[2]} |")


RUNS = re.compile(r"^(\d+) runs, (replayed|simulated): (\d+ of \d+) paths see .*; median smallest move seen ([\d.]+)%$")


def with_runs(kind: str) -> list[str]:
    """results/power/hopper-vm-KIND-runs.txt as a row of docs/verdict.md's table of 3, 5 and 10 runs: each
    count's replayed figure, or its simulated one ('sim') where no night was left over to replay."""
    found: dict[int, dict[str, tuple[str, float]]] = {}
    for line in POWER.joinpath(f"hopper-vm-{kind}-runs.txt").read_text().splitlines():
        if row := RUNS.match(line):
            found.setdefault(int(row[1]), {})[row[2]] = (row[3], float(row[4]))
    cells = []
    for runs in (3, 5, 10):
        how = "replayed" if "replayed" in found[runs] else "simulated"
        seen, pct = found[runs][how]
        size = "over 1000%" if pct >= 1000 else f"{pct:.0f}%" if pct >= 100 else f"{pct:.1f}%"
        cells.append(f"{size} ({seen})" + (" sim" if how == "simulated" else ""))
    return cells


def test_the_power_with_three_five_and_ten_runs_is_as_the_power_tables_give(verdict_page):
    kinds = {"one H200": "h200", "the H200 pair": "h200-pair", "four H200s": "h200x4", "one H100": "h100"}
    for name, kind in {**kinds, "the H100 pair": "h100-pair"}.items():
        text = POWER.joinpath(f"hopper-vm-{kind}-runs.txt").read_text()
        real = re.search(r"real runs that measured every path: (\d+) of (\d+)", text)
        assert real, f"results/power/hopper-vm-{kind}-runs.txt: no count of its real runs"
        runs = real[1] if real[1] == real[2] else f"{real[1]} of {real[2]}"
        cells = with_runs(kind)
        if kind == "h100":  # the page says why three runs see nothing there
            cells[0] += ": nothing to pool"
        states(verdict_page, f"| {name} ({runs}) | {' | '.join(cells)} |")


# --- the CV floor's experiment ------------------------------------------------------------------------------


def test_the_cv_floors_experiment_is_counted_as_its_replay_gave(verdict_page):
    """The experiment kept in the statistics-alone replay's file: the floor at 0.1%, 100 clean nights."""
    text = REPLAYS.joinpath("hopper-vm-h100-2026-11-28.txt").read_text()
    clean = re.search(
        r"^CV_FLOOR 0.001: clean 100: first-run flagged \d+, unstable first (\d+), exit 2 (\d+)$", text, re.M
    )
    caught = [int(n) for n in re.findall(r"^  host link .*: x10 unstable (\d+)/10$", text, re.M)]
    assert clean and caught, "results/replays/hopper-vm-h100-2026-11-28.txt: the CV floor's lines unreadable"
    states(
        verdict_page,
        f"catches rose to {span(caught)} of 10, but {clean[1]} of 100 clean nights were flagged unstable on their "
        f"first run ({clean[2]} exit 2)",
    )
    statistics = power("h100", "statistics")
    states(
        verdict_page,
        f"(0 false, {int((statistics['bench_power_50'] >= 0.9).sum())} of {len(statistics)} paths at 50%)",
    )
    assert int(statistics["sim_false"].sum()) == 0


# --- every count is read from results, or said where it is read -------------------------------------------

#: The counts the pages state that no test above builds, each by the words around it (exact, on one page),
#: with where it is read: a test of its own, a night's output quoted, or dated (measured once, under rules or
#: runs the passage names, not measured again). A count a page gains without either fails the test below.
READ_ELSEWHERE = {
    "94 of 94 (`test_a_first_night": "tests/test_fake_gpu.py, named beside it (at least 90 of all there)",
    "163 of 163, each line's reference": "dated: the first night of one H200 (2026-11-28 11:27), when it ran",
    "373 of 374 (the ping-pong": "dated: the four H200s' nights against their references, when bounds came",
    "9 of 9 synthetic upgrades before (`tests/test_verdi": "dated: before one case alone (tests/test_verdict_rules.py)",
    "30 of the 32 paths that neighbour": "tests/test_nightly.py judges that night again from its perflogs",
    "24 of the 32 paths slowed": "tests/test_nightly.py, against its first three runs",
    "30 of 32 | by path": "tests/test_nightly.py, against the six runs",
    "30 of the 32: still passed": "tests/test_nightly.py, against the six runs",
    "4 of 4), while Unified Memory": "the pooled spreads the night was judged with, which the passage gives",
    "4 of the 4 paths owed a flag": "the pooled spreads the night was judged with, which the passage gives",
    "95 of 100 flag that path": "a test bound (tests/test_verdict.py)",
    "2 of 200 flag a path (test bound)": "a test bound (tests/test_verdict.py)",
    "95 of 100 nights, with another": "a test bound (tests/test_verdict.py)",
    "20 of 20; an odd accepted run": "a test bound (tests/test_verdict.py)",
    "8 of 9 clean nights on freshly": "dated: rejudged-paths.csv under older rules; the next sentence gives now's",
    "4 of 4 figures; IMPROVED": "the night's output, quoted (perflogs/hopper-vm/logs/)",
    "4 of 4 figures). With 11:52": "the nights' output, quoted (nightly-clean-h200x1-2026-11-28T*.txt)",
    "13 of 16 figures, spread 4.8%": "the night's output, quoted (perflogs/hopper-vm/logs/)",
    "2 of 4 figures moved, 8 B": "the night's output, quoted (perflogs/hopper-vm/logs/)",
    "20 of 22 paths (never on DAXPY": "dated: the bench against the simulation, 2026-11-28 (results/power/)",
    "2 of 10, on h2d by the copy": "dated: the bench's clean nights, 2026-11-28 (results/power/)",
    "6 of 22 paths a 10% move": "dated: the eight runs accepted then, as the passage says",
    "41 of 200 flagged for any reason": "dated: the ten accepted runs of 2026-11-26, as the passage says",
    "67 of 100 clean nights": "dated: 2026-11-26, as the passage says",
    "7 of 63 paths saw a 10% move": "dated: the pair's three accepted runs; the passage gives now's 9",
    "15 of 63 paths saw a 10% move": "dated: the pair's three accepted runs; the passage gives the six's after",
    "5 of 5 tries": "tests/test_partition.py, five trials of three and of four nodes",
    "20 of 20 | a quarter slower, 19 of 20 or more": "the table's headings: the issue's lines, not counts",
    "185 of the 440 partitions (8 of 19)": "an expectation: 8 of the 19 nights drawn 8 at a time into 440",
    "18 of 20 became 14-20": "results/replays/hopper-vm-partition-power-h100*.txt, path by path",
    "4 of 4 nodes), exit 2": "tests/test_partition_slurm.py, in CI",
    "50 of 50 seeds": "a test bound (tests/test_changepoints.py)",
    "45 of 50 at 0.7%": "a test bound (tests/test_changepoints.py)",
    "20 of 20; pure noise": "a test bound (tests/test_changepoints.py)",
    "100 of 100 seeds": "a test bound (tests/test_changepoints.py)",
    "18 of the 22 paths, mostly": "dated: PELT on the history before 2026-11-24 20:06, as the passage says",
    "8 of GPU 0": "dated: the killed night's first pass as its output said it; no table of it was kept",
    "4 of 200 unchanged upgrades flagged under the first r": "dated: the first instability rule, not kept",
    "19 of 134 CPU-seconds": "dated: a profile of the quick tier on 2026-11-28, as the passage says",
}
#: The pages whose counts are read: README and every page of docs/ but the experiments' result pages.
COUNTED_PAGES = ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]


def built_sentences(h100, h100_before, verdict_page) -> list[str]:
    """Every sentence the tests above build from committed results (each run, its `states` recorded)."""
    said = []
    tests = [test for name, test in globals().items() if name.startswith("test_") and name != _THIS]
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(globals(), "states", lambda page, sentence, where="": said.append(sentence))
        given = {"h100": h100, "h100_before": h100_before, "verdict_page": verdict_page}
        for test in tests:
            wants = test.__code__.co_varnames[: test.__code__.co_argcount]
            assert set(wants) <= set(given), f"{test.__name__} takes {set(wants) - set(given)}: give them here"
            try:
                test(**{name: given[name] for name in wants})
            except pytest.skip.Exception as skipped:  # a count no test read is no count read
                pytest.fail(f"{test.__name__} skipped ({skipped}): its sentences were not built")
    return said


def test_every_count_the_pages_state_is_read_from_committed_results(h100, h100_before, verdict_page):
    """Each 'N of M' of README and docs/ lies in a sentence a test above builds from committed results, or
    READ_ELSEWHERE says where it is read: a count added without its results fails here, and so does an
    entry of READ_ELSEWHERE its page no longer says."""
    said = built_sentences(h100, h100_before, verdict_page)
    unread, kept = [], set()
    for name in COUNTED_PAGES:
        page = prose(REPO / name)
        covered = [
            (m.start(), m.start() + len(s)) for s in [*said, *READ_ELSEWHERE] for m in re.finditer(re.escape(s), page)
        ]
        kept |= {s for s in READ_ELSEWHERE if s in page}
        for n in re.finditer(r"\d+ of (?:the )?\d+(?: of GPU 0)?", page):
            if not any(a <= n.start() and n.end() <= b for a, b in covered):
                unread.append(f"{name}: ...{page[max(0, n.start() - 40) : n.end() + 20]}...")
    assert not unread, "counts no test reads from committed results:\n" + "\n".join(unread)
    assert kept == set(READ_ELSEWHERE), f"READ_ELSEWHERE names what no page says: {set(READ_ELSEWHERE) - kept}"


_THIS = test_every_count_the_pages_state_is_read_from_committed_results.__name__
