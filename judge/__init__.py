"""The judges: pure functions from tables (reports/load.py's tidy table and
the per-run table made from it) to typed verdicts. No ReFrame, no files, no
printing: the verdict by path against accepted runs or in pairs
(verdict.py), each GPU against its siblings (siblings.py), change points over
the nights (changepoints.py), two sets of runs (compare.py), rows chosen by
field and run (select.py), and what each exit status means (status.py)."""
