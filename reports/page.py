"""The shell of every page of a report: its style, heading and way back to the index."""

from __future__ import annotations

import html
from urllib.parse import quote

#: How every page names its changes (judge/explain.py's sign: the figure's change, positive where worse)...
WORSE = "% worse"
#: ... and says what the sign means, in each table's header.
WORSE_HEADER = "% worse (positive is worse)"

_STYLE = """
body { font-family: sans-serif; margin: 1em auto; padding: 0 1.5em; max-width: 1500px; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #f0f0f0; }
td:first-child, th:first-child, td.text { text-align: left; }
figure { margin: 1em 0 2em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption, caption { font-size: 0.85em; color: #444; caption-side: bottom; text-align: left; }
.warn { color: #a00; }
.verdict { border-left: 6px solid #888; background: #f7f7f7; padding: 0.3em 1em; margin: 0.5em 0 1.5em 0; }
.verdict h2 { margin: 0.3em 0; }
.verdict ul { margin: 0.2em 0; }
.exit0 { border-color: #2a8a2a; background: #f1f8f1; }
.exit1 { border-color: #b00020; background: #fbeff1; }
.exit2 { border-color: #d9822b; background: #fdf5ec; }
.exit3 { border-color: #5577aa; background: #f0f3f9; }
.next { font-size: 1.05em; }
.verdicts td:first-child { min-width: 14em; }
.verdicts td.text:last-child { min-width: 22em; }
.aside { font-size: 0.85em; color: #444; }
.nights th { text-align: left; }
.nights td:last-child { min-width: 16em; }
.nights small { color: #444; }
"""


def page_html(
    title: str,
    body: list[str],
    heading: str = "",
    anchor: str = "",
    back: str = "",
    back_text: str = "the report's index",
) -> str:
    """A page of the report: its heading (by default the title) with an
    anchor where given, a link back to `back` (the report's index, or what
    `back_text` names) where given, the body."""
    heading = heading or title
    name = f" id='{html.escape(anchor)}'" if anchor else ""
    top = [f"<p><a href='{html.escape(quote(back))}'>&larr; {html.escape(back_text)}</a></p>"] if back else []
    return "\n".join(
        [
            f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>",
            f"<style>{_STYLE}</style></head><body>",
            *top,
            f"<h1{name}>{html.escape(heading)}</h1>",
            *body,
            "</body></html>",
        ]
    )
