"""The report as a browser shows it: every page of a report opened in headless
Chromium (Debian's chromium and chromium-driver, driven through Selenium),
its images checked, its console read and a screenshot taken.

    python -m reports screenshots REPORT_DIR -o DIR    a PNG per page; exit 1 on a broken image or a console error
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

# An image that failed (missing file, not an image) is complete with no width.
BROKEN_IMAGES = (
    "return Array.from(document.images)"
    ".filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute('src'))"
)
WINDOW = (1400, 1000)


@dataclass
class Look:
    """One page as the browser showed it."""

    page: Path
    screenshot: Path
    images: int = 0
    broken: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.broken and not self.errors

    def problems(self) -> list[str]:
        return [f"{self.page}: image {src} did not load" for src in self.broken] + [
            f"{self.page}: console error: {message}" for message in self.errors
        ]


def find_chromium() -> tuple[str, str]:
    """Chromium and its WebDriver, or SystemExit saying how to get them."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not browser or not driver:
        raise SystemExit("screenshots: needs chromium and chromedriver (Debian: apt install chromium chromium-driver)")
    return browser, driver


@contextlib.contextmanager
def chromium(window: tuple[int, int] = WINDOW) -> Iterator:
    """A headless Chromium whose console messages can be read (goog:loggingPrefs)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = find_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={window[0]},{window[1]}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    session = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        yield session
    finally:
        session.quit()


def look(session, page: Path, screenshot: Path) -> Look:
    """Open `page` (Selenium waits for its load event, images included) and
    take what the browser says of it."""
    session.get(page.resolve().as_uri())
    seen = Look(page, screenshot)
    seen.images = session.execute_script("return document.images.length")
    seen.broken = session.execute_script(BROKEN_IMAGES)
    seen.errors = [entry["message"] for entry in session.get_log("browser") if entry["level"] == "SEVERE"]
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    session.save_screenshot(str(screenshot))
    return seen


def report_pages(report: Path) -> dict[str, Path]:
    """A report's pages by screenshot name: the index, each check's page and each history page."""
    pages = {"index": report / "index.html"}
    pages |= {p.stem: p for p in sorted(report.glob("*.html")) if p.stem != "index"}
    pages |= {p.parent.name: p for p in sorted(report.glob("history-*/history.html"))}
    return pages


def look_at_report(report: Path, outdir: Path) -> list[Look]:
    """Every page of the report in one browser, a screenshot of each as NAME.png in `outdir`."""
    pages = report_pages(Path(report))
    if not pages["index"].exists():
        raise SystemExit(f"screenshots: {pages['index']} is missing: make the report with `python -m reports html`")
    with chromium() as session:
        return [look(session, page, Path(outdir) / f"{name}.png") for name, page in pages.items()]


def add_parsers(sub) -> None:
    """screenshots in the suite's one parser (reports/cli.py)."""
    p = sub.add_parser("screenshots", help="open a report's pages in headless Chromium; a screenshot of each")
    p.add_argument("report", type=Path, help="the directory `python -m reports html` wrote")
    p.add_argument("-o", "--output", type=Path, required=True, help="directory for one PNG per page")
    p.set_defaults(func=screenshots)


def screenshots(args) -> int:
    looks = look_at_report(args.report, args.output)
    for seen in looks:
        for problem in seen.problems():
            print(f"screenshots: {problem}", file=sys.stderr)
    bad = sum(not seen.ok for seen in looks)
    print(f"screenshots: {len(looks)} pages, {sum(s.images for s in looks)} images, {bad} with problems: {args.output}")
    return 1 if bad else 0
