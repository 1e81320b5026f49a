"""The suite's one command line for what reads perflogs and what drives
ReFrame for a verdict (commands/cli.py; ./suite's report, nightly, accept,
rejudge, power and upgrade go through it). It sits above every package and
nothing imports it:

    python -m commands load [PERFLOGS...]                        the table, and what could not be read
    python -m commands compare --by driver_version --base 570 --new 580
    python -m commands html [PERFLOGS...] -o results/NAME        index.html, a page per check, each system's history
    python -m commands night STAMP [-o DIR]                      a committed night's page drawn again
    python -m commands screenshots [results/NAME -o DIR]         its pages in headless Chromium, a PNG of each
    python -m commands history|grafana ...                       a system's nights; a dashboard over them
    python -m commands nightly|accept|rejudge|power|upgrade ...  what ./suite runs of the same names

The packages below it, each one role, lowest first: systems/ (what a system
is, as data), experiments/ (each experiment's one home, and the data roots),
judge/ (pure functions from tables to verdicts), reports/ (perflogs and
results read, figures and pages drawn), runner/ (ReFrame driven for a
night, an acceptance, an upgrade; results written). tests/test_layers.py
holds each to importing only what is below it.
"""
