"""A real headless Chromium (Debian's ``chromium``, installed by scripts/test) opening a report,
driven by playwright with that very binary (never a browser of playwright's own download).

    seen = open_report(path, screenshot="page.png")
    assert seen.requests == [seen.url] and not seen.console_errors
"""

from __future__ import annotations

import io
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
VIEWPORT = {"width": 1200, "height": 900}


@dataclass
class PageSeen:
    url: str
    requests: list[str] = field(default_factory=list)  # every URL the page asked for, the file's own included
    console_errors: list[str] = field(default_factory=list)  # console errors and warnings, uncaught exceptions
    charts: list[bytes] = field(default_factory=list)  # a PNG screenshot of each chart on the page
    text: str = ""  # the page's visible text


def require_chromium() -> None:
    if shutil.which(CHROMIUM) is None or not _has_playwright():
        if os.environ.get("GYM_REQUIRE_CLUSTER") == "1":
            pytest.fail(
                f"no {CHROMIUM} or no playwright, but scripts/test installs both (apt chromium, the test extra)"
            )
        pytest.skip(f"no {CHROMIUM} (apt-get install chromium) or no playwright (the test extra)")


def _has_playwright() -> bool:
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return True


def open_report(path: Path, screenshot: Path | None = None) -> PageSeen:
    """Load the file, record its requests and console, screenshot each chart (and the whole page
    to ``screenshot``)."""
    return open_page(path.resolve().as_uri(), screenshot)


def open_page(url: str, screenshot: Path | None = None, click: str | None = None) -> PageSeen:
    """Load ``url`` (and, with ``click``, follow the link of that text),
    record every request and the console, screenshot each chart (and the whole page to ``screenshot``)."""
    from playwright.sync_api import sync_playwright

    require_chromium()
    seen = PageSeen(url)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport=VIEWPORT)
            page.on("request", lambda request: seen.requests.append(request.url))
            page.on(
                "console",
                lambda message: (
                    seen.console_errors.append(f"{message.type}: {message.text}")
                    if message.type in ("error", "warning")
                    else None
                ),
            )
            page.on("pageerror", lambda error: seen.console_errors.append(f"exception: {error}"))
            page.goto(seen.url, wait_until="load")
            page.wait_for_load_state("networkidle")
            if click is not None:
                page.get_by_role("link", name=click).first.click()
                page.wait_for_load_state("networkidle")
            seen.charts = [chart.screenshot() for chart in page.locator("figure.chart").all()]
            seen.text = page.inner_text("body")
            if screenshot is not None:
                page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    return seen


def ink(png: bytes, near: tuple[int, int, int] | None = None, tolerance: int = 40) -> float:
    """The share of a PNG's pixels that are not white (or, with ``near``, close to that colour)."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).reshape(-1, 3).astype(int)
    if near is None:
        hits = int((pixels.min(axis=1) < 235).sum())
    else:
        hits = int((np.abs(pixels - np.array(near)) <= tolerance).all(axis=1).sum())
    return hits / len(pixels)


LINE_BLUE = (0x2B, 0x6C, 0xB0)  # the charts' line colour (verbs/report/page.py)
