"""The report as a browser shows it: every page a report's index leads to,
opened in headless Chromium (Debian's chromium and chromium-driver, driven
through Selenium), its images and links checked, its console read and a
screenshot taken.

    ./suite report screenshots REPORT_DIR -o DIR    a PNG per page; exit 1 on a broken image or link,
                                                  or a console error (runner/pages.py: the command, and
                                                  the pages README shows without REPORT_DIR)
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

# An image that failed (missing file, not an image) is complete with no width.
BROKEN_IMAGES = (
    "return Array.from(document.images)"
    ".filter(i => !i.complete || i.naturalWidth === 0).map(i => i.getAttribute('src'))"
)
LINKS = "return Array.from(document.links).map(a => a.href)"
WINDOW = (1400, 1000)


@dataclass
class Look:
    """One page as the browser showed it."""

    page: Path
    screenshot: Path
    images: int = 0
    broken: list[str] = field(default_factory=list)
    links: list[Path] = field(default_factory=list)  # the files it links to
    dead: list[Path] = field(default_factory=list)  # those missing
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.broken and not self.dead and not self.errors

    def problems(self) -> list[str]:
        return (
            [f"{self.page}: image {src} did not load" for src in self.broken]
            + [f"{self.page}: link to {path}, which is missing" for path in self.dead]
            + [f"{self.page}: console error: {message}" for message in self.errors]
        )


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
    session.get_log("browser")  # what an earlier page logged late is not this page's
    session.get(page.resolve().as_uri())
    seen = Look(page, screenshot)
    seen.images = session.execute_script("return document.images.length")
    seen.broken = session.execute_script(BROKEN_IMAGES)
    seen.links = [local for local in map(_local_file, session.execute_script(LINKS)) if local is not None]
    seen.dead = [path for path in seen.links if not path.exists()]
    seen.errors = [entry["message"] for entry in session.get_log("browser") if entry["level"] == "SEVERE"]
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    session.save_screenshot(str(screenshot))
    return seen


def _local_file(url: str) -> Path | None:
    """The file a file:// link points to, without its #anchor; None for other links."""
    parts = urlparse(url)
    return Path(url2pathname(parts.path)).resolve() if parts.scheme == "file" else None


def shot_name(page: Path, report: Path) -> str:
    """A page's name for its screenshot: index and <check> for the report's
    own pages, its folder's name for a folder's index or history
    (history-<system>-<kind>, night-<system>-<kind>), else folder-page (a partition's node pages)."""
    if page.parent == report:
        return page.stem
    if page.name in ("index.html", "history.html"):
        return page.parent.name
    return f"{page.parent.name}-{page.stem}"


def look_at_report(report: Path, outdir: Path, extra: list[Path] = ()) -> list[Look]:
    """Every page the report's index (and each of `extra`) leads to, in one
    browser: a screenshot of each as NAME.png in `outdir` (pages of an
    earlier report nothing links to are left alone)."""
    report = Path(report).resolve()
    index = report / "index.html"
    if not index.exists():
        raise SystemExit(f"screenshots: {index} is missing: make the report with `./suite report html`")
    queue = [index, *(Path(p).resolve() for p in extra)]
    looks, seen = [], set(queue)
    with chromium() as session:
        while queue:
            page = queue.pop(0)
            looked = look(session, page, Path(outdir) / f"{shot_name(page, report)}.png")
            looks.append(looked)
            found = [p for p in dict.fromkeys(looked.links) if p.suffix == ".html" and p.exists() and p not in seen]
            seen.update(found)
            queue += found
    return looks


def said(looks: list[Look], outdir: Path) -> int:
    """Each problem a page had, on stderr, and a line of what was looked at: 1 where a page had a problem."""
    for seen in looks:
        for problem in seen.problems():
            print(f"screenshots: {problem}", file=sys.stderr)
    bad = sum(not seen.ok for seen in looks)
    print(f"screenshots: {len(looks)} pages, {sum(s.images for s in looks)} images, {bad} with problems: {outdir}")
    return 1 if bad else 0
