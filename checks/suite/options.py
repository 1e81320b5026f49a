"""The mistakes in ReFrame's options a suite command is given, named before
ReFrame runs: a system no systems/*.yaml declares, a check selected with
``-n NAME`` that matches none of the suite's, and a variable set with
``-S [test.]name=value`` that no test of the suite has, or on a test the
suite does not have. ReFrame itself only warns of the variable and runs with
the default, so a typo in a site's crontab would measure the wrong case
every night and say nothing.

    python -m checks.suite.options [reframe options]
    python -m checks.suite.options --suite-list    # the systems and what each check lets a site set

prints each mistake, naming the word and the nearest known ones, and exits
3 (a usage error); 0 where there is none. ``./suite run`` and the nightly
call it first.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from pathlib import Path

from systems import data

#: The suite's check modules (checks/*.py), each with its test classes.
CHECKS = Path(__file__).resolve().parent.parent


def option_values(options: list[str], short: str | None, long: str) -> list[str]:
    """The value of every use of an option, in ReFrame's forms: -S X, -SX, --setvar X, --setvar=X."""
    found = []
    for i, option in enumerate(options):
        if option in (short, long) and i + 1 < len(options):
            found.append(options[i + 1])
        elif option.startswith(f"{long}="):
            found.append(option.split("=", 1)[1])
        elif short and option.startswith(short) and len(option) > len(short):
            found.append(option[len(short) :])
    return found


def named_system(options: list[str]) -> str | None:
    """The system ReFrame's options name (--system X, --system=X), if any."""
    return next(iter(option_values(options, None, "--system")), None)


def settings(options: list[str]) -> list[str]:
    """The `[test.]name=value` of every -S."""
    return option_values(options, "-S", "--setvar")


def test_classes() -> dict[str, type]:
    """Every test class of the suite: the checks (checks/*.py) and their build fixtures."""
    from checks.suite.build import GdrCopyBuild, SuiteBuild

    classes = {"SuiteBuild": SuiteBuild, "GdrCopyBuild": GdrCopyBuild}
    for path in sorted(CHECKS.glob("*.py")):
        module = importlib.import_module(f"checks.{path.stem}")
        for name, cls in vars(module).items():
            if inspect.isclass(cls) and hasattr(cls, "_rfm_var_space") and cls.__module__ == module.__name__:
                classes[name] = cls
    return classes


def display_names(classes: dict[str, type]) -> list[str]:
    """Every variant's display name without its spaces, as ReFrame's -n matches it ('path_matrix%paths=host-ce')."""
    names = []
    for name, cls in classes.items():
        for variant in range(cls.num_variants):
            params = cls.get_variant_info(variant)["params"]
            names.append(name + "".join(f"%{p}={cls.raw_params[p].format(v)}" for p, v in params.items()))
    return names


def selections(options: list[str]) -> list[str]:
    """The NAME of every -n."""
    return option_values(options, "-n", "--name")


def test_variables() -> dict[str, set[str]]:
    """Every test class of the suite and the variables it has."""
    return {name: set(cls._rfm_var_space) for name, cls in test_classes().items()}


def listing(systems: dict) -> list[str]:
    """What ./suite run --help lists: the systems, and each check's variables a site may set with their ranges."""
    from checks.suite.settings import rules_of

    lines = ["Systems (--system NAME; systems/NAME.yaml):"]
    lines += [f"  {name:14} {system.get('description', '')}" for name, system in sorted(systems.items())]
    lines += ["", "Variables a site may set (-S [check.]variable=value), checked before any job is written:"]
    for name, cls in test_classes().items():
        rules = rules_of(cls)
        if rules and not name[0].isupper():
            lines.append(f"  {name}:")
            lines += [f"    {variable:18} {rule.what()}" for variable, rule in sorted(rules.items())]
    return lines


#: What a value that reaches a job script may hold (a -S value, a folder ReFrame writes the stage or the
#: output under): the words, numbers, sizes, lists and paths the suite's variables take, and nothing a
#: shell reads as more than a word (a space, a newline, ';', '$', a quote, a backtick, a glob, a bracket).
SAFE_WORD = re.compile(r"[A-Za-z0-9._/+=@,:%~-]*")
#: ReFrame's options whose value is a folder the job scripts name.
FOLDER_OPTIONS = (("--prefix", None), ("--stage", "-s"), ("--output", "-o"), ("--perflogdir", None))


def _shown(word: str) -> str:
    return repr(word if len(word) <= 60 else word[:57] + "...")


#: ReFrame's long options whose values the suite checks: given only whole, since ReFrame's parser takes a
#: prefix of one ('--stag') for it, which would pass a check that looks for the whole name.
CHECKED_LONG = ("--setvar", "--system", "--name", "--tag", *(long for long, _ in FOLDER_OPTIONS))


def abbreviated(options: list[str]) -> list[str]:
    """Each option that abbreviates one of CHECKED_LONG, named with the option to give whole."""
    found = []
    for option in options:
        word = option.split("=", 1)[0]
        if not word.startswith("--") or word in CHECKED_LONG:
            continue
        meant = [long for long in CHECKED_LONG if long.startswith(word) and len(word) > 2]
        if meant:
            found.append(f"{word}: give the option whole ({' or '.join(meant)}): the suite checks it by name")
    return found


def unsafe_words(options: list[str]) -> list[str]:
    """A -S value or a folder option whose value no job script may hold unquoted (SAFE_WORD), each named;
    an abbreviated option that would slip past the check (abbreviated)."""
    found = abbreviated(options)
    for setting in settings(options):
        name, _, value = setting.partition("=")
        if not SAFE_WORD.fullmatch(value):
            found.append(
                f"-S {name}={_shown(value)}: a value holds a character a job script would read as shell "
                "(letters, digits and ._/+=@,:%~- only)"
            )
    for long, short in FOLDER_OPTIONS:
        for value in option_values(options, short, long):
            if not value or not SAFE_WORD.fullmatch(value):
                found.append(f"{long} {_shown(value)}: a folder the job scripts name (letters, digits, ._/+=@,:%~-)")
    return found


def mistakes(options: list[str], systems: dict | None = None, tests: dict[str, set[str]] | None = None) -> list[str]:
    """What in `options` names nothing the suite has, or holds what a job script would run, each as a usage
    error's message."""
    found = unsafe_words(options)
    system = named_system(options)
    if system is not None:
        try:
            data.known_system(system, systems)
        except SystemExit as err:
            found.append(str(err.code))
    for pattern in selections(options):
        if pattern.startswith("/") or "@" in pattern:  # a hash or a variant number: ReFrame's own selections
            continue
        names = display_names(test_classes())
        try:
            matched = any(re.search(pattern, n) for n in names)
        except re.error as err:
            found.append(f"-n {pattern!r}: not a regular expression ({err})")
            continue
        if not matched:
            found.append(data.unknown("-n: no check matches", pattern, {n.split("%")[0] for n in names}))
    wanted = settings(options)
    if wanted:
        tests = test_variables() if tests is None else tests
        every = set().union(*tests.values())
        for setting in wanted:
            # ReFrame's form: [TEST.][FIXTURE.]*VARIABLE=VALUE.
            parts = setting.split("=", 1)[0].split(".")
            test, variable = (parts[0] if len(parts) > 1 else ""), parts[-1]
            known = tests[test] if len(parts) == 2 and test in tests else every
            if "=" not in setting:
                found.append(f"-S {setting!r}: not [test.]variable=value")
            elif test and test not in tests:
                found.append(data.unknown("-S: test", test, tests))
            elif variable not in known:
                where = f"of {test}" if len(parts) == 2 else "of any test"
                found.append(data.unknown(f"-S: variable {where}", variable, (v for v in known if v[0] != "_")))
            else:
                found += out_of_range(test, variable, setting.split("=", 1)[1], set(tests))
    found += unknown_tags(options)
    return found


def out_of_range(test: str, variable: str, value: str, among: set[str]) -> list[str]:
    """`-S [test.]variable=value` refused where the value is outside its rule's range on every node
    (checks/suite/settings.py's fixed_problem), on `test` or else each test of `among` that has the
    variable: named before a job script is written."""
    from checks.suite.settings import fixed_problem, rules_of

    classes = {name: cls for name, cls in test_classes().items() if name in among}
    found = []
    for name, cls in classes.items() if not test else [(test, classes[test])] if test in classes else []:
        rule = rules_of(cls).get(variable)
        why = fixed_problem(rule, value) if rule is not None else None
        if why:
            found.append(f"-S {name}.{variable}={value!r}: must be {why}")
    return found[:1]  # one line: the same rule on every check that has it


def tags_of(classes: dict[str, type]) -> set[str]:
    """Every tag of the suite's checks."""
    return {tag for cls in classes.values() for tag in getattr(cls, "tags", ())}


def unknown_tags(options: list[str]) -> list[str]:
    """A -t TAG (ReFrame: a regular expression) that no check's tag matches: it would select nothing and
    the run would pass having measured nothing."""
    wanted = option_values(options, "-t", "--tag")
    if not wanted:
        return []
    tags = tags_of(test_classes())
    found = []
    for pattern in wanted:
        try:
            matched = any(re.search(pattern, tag) for tag in tags)  # as ReFrame matches -t
        except re.error as err:
            found.append(f"-t {pattern!r}: not a regular expression ({err})")
            continue
        if not matched:
            found.append(data.unknown("-t: no check has the tag", pattern, tags))
    return found


def main(argv: list[str]) -> int:
    if argv[:1] == ["--suite-list"]:  # not ReFrame's --list
        print("\n".join(listing(data.load_all())))
        return 0
    errors = mistakes(argv)
    for error in errors:
        print(f"suite: {error}", file=sys.stderr)
    return 3 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
