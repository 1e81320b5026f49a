"""Reports of the suite: perflogs to tidy tables, comparisons, figures and the
nightly's verdict, through one command line (reports/cli.py):

    python -m reports load [PERFLOGS...]                        the table, and what could not be read
    python -m reports compare --by driver_version --base 570 --new 580
    python -m reports html [PERFLOGS...] -o results/NAME        index.html, a page per check, each system's history
    python -m reports screenshots results/NAME -o DIR           its pages in headless Chromium, a PNG of each
    python -m reports history|grafana ...                       a system's nights; a dashboard over them
    python -m reports nightly|accept|rejudge|power|upgrade ...  what ./suite runs of the same names

reports/load.py reads the table, reports/runs.py the nightly runs and the
accepted baseline, reports/verdict.py judges by path, reports/status.py says
what each exit status means, reports/figures/ draws (one module per
experiment). Each experiment's own knowledge is in experiments/.
"""
