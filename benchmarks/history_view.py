"""How fast the view's history page answers in a real browser: the results store's leaderboard of
100 checkpoints x 30 benchmarks and a curve per benchmark (one training run, each entry with its
per-task scores, one regression planted), served by `gym eval view` and loaded in Debian's headless
Chromium (playwright, the system binary), timed from navigation to the `load` event. Each load reads
the store, judges every checkpoint against the one before it (paired over tasks) and renders the
page: the matrix, and the curves as inline SVG.

    .venv/bin/python benchmarks/history_view.py [--checkpoints 100] [--benchmarks 30] [--tasks 200] [--repeats 5]
    .venv/bin/python benchmarks/history_view.py --results-url postgresql+psycopg://USER@HOST/DB  # an empty database

Target (issue #41): under 3 s. A benchmark, not a test: its figures vary with the machine's load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "tests" / "view"))

from history_store import fill, training_run  # noqa: E402

CHROMIUM = "/usr/bin/chromium"


def load_seconds(page, url: str) -> float:
    start = time.perf_counter()
    page.goto(url, wait_until="load")
    return time.perf_counter() - start


def browser_loads(base: str, repeats: int) -> tuple[list[float], str, int]:
    """Each load's seconds, the page's text and how many curves it draws (the last load's)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        seconds = [load_seconds(page, f"{base}/history") for _ in range(repeats)]
        text = page.inner_text("body")
        curves = page.locator("figure.curve").count()
        browser.close()
    return seconds, text, curves


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--checkpoints", type=int, default=100)
    ap.add_argument("--benchmarks", type=int, default=30)
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--results-url", help="an empty database to fill (default: an SQLite file of its own)")
    args = ap.parse_args()

    from nemo_gym.orchestration.library import Viewer, serve
    from nemo_gym.orchestration.verbs.view import pages as view

    with tempfile.TemporaryDirectory(prefix="gym-history-view-") as tmp:
        os.environ["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        url = args.results_url or f"sqlite:///{tmp}/results.sqlite"
        planted = (args.checkpoints * 3 // 5, args.benchmarks // 4)
        start = time.perf_counter()
        written = fill(url, training_run(args.checkpoints, args.benchmarks, args.tasks, planted=planted))
        filled = time.perf_counter() - start
        viewer = Viewer([], results_url=url)
        start = time.perf_counter()
        html = viewer.history_html(view.Links())
        rendered = time.perf_counter() - start
        server = serve(viewer, "127.0.0.1", 0)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        seconds, text, curves = browser_loads(f"http://127.0.0.1:{server.server_address[1]}", args.repeats)
        server.shutdown()
        server.server_close()

    shown = sum(1 for c in range(args.checkpoints) if f"/ckpt/run-a/step-{100 * (c + 1)}\t" in text)
    print(
        f"store: {written} entries ({args.checkpoints} checkpoints x {args.benchmarks} benchmarks x {args.tasks} tasks) written in {filled:.2f} s"
    )
    print(f"page made by the server (store read, regressions judged, HTML {len(html) / 1e3:.0f} kB): {rendered:.2f} s")
    print(
        f"history page in headless Chromium: {statistics.median(seconds):.2f} s median of {args.repeats} "
        f"(min {min(seconds):.2f}, max {max(seconds):.2f}; target < 3 s; {shown} checkpoint rows and {curves} curves "
        f"on the page)"
    )


if __name__ == "__main__":
    main()
