"""Reports: perflogs read into one tidy table (load.py), the committed runs and
baselines read (runs.py), and what people look at drawn from them: figures
per experiment (figures/, one module per experiment), static HTML pages
(html.py, page.py), each system's history (history.py), a Grafana dashboard
(grafana.py), screenshots in a browser (browser.py). It reads results and
judges nothing; the command line is commands/."""
