"""Reports of the suite: perflogs to tidy tables, comparisons and figures.

    python -m reports load [PERFLOGS...]                        the table, and what could not be read
    python -m reports compare --by driver_version --base 570 --new 580 [--threshold 5]
    python -m reports html [PERFLOGS...] -o reports/NAME        PNG figures and index.html

See reports/load.py (the table), reports/compare.py (statistics) and
reports/figures/ (figures, one module per experiment), reports/accept.py (acceptance).
"""
