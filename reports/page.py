"""The shell of every page of a report: its style, heading and way back to the index."""

from __future__ import annotations

import html
from urllib.parse import quote

_STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1500px; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }
th { background: #f0f0f0; }
td:first-child, th:first-child { text-align: left; }
figure { margin: 1em 0 2em 0; }
figure img { max-width: 100%; border: 1px solid #ddd; }
figcaption, caption { font-size: 0.85em; color: #444; caption-side: bottom; text-align: left; }
.warn { color: #a00; }
"""


def page_html(title: str, body: list[str], heading: str = "", anchor: str = "", back: str = "") -> str:
    """A page of the report: its heading (by default the title) with an
    anchor where given, a link to the report's index at `back` where given,
    the body."""
    heading = heading or title
    name = f" id='{html.escape(anchor)}'" if anchor else ""
    top = [f"<p><a href='{html.escape(quote(back))}'>&larr; the report's index</a></p>"] if back else []
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
