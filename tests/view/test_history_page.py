"""The view's history page without a browser (tests/view/test_view_in_chromium.py loads it in one):
the store's checkpoints x benchmarks in the words of ``gym eval history`` (the same best lines,
regression lines and detectable drop), incomplete cells marked, regressed cells outlined; filtered
by model prefix and sweep; a bad filter, a store turned off or out of reach, one line on the page;
what the store holds escaped and shortened; written by --static and linked from the index."""

from __future__ import annotations

import html
import re
import threading
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from history_store import entry, fill

from nemo_gym.orchestration.library import Viewer, serve, write_static
from nemo_gym.orchestration.verbs.history.command import history_text
from nemo_gym.orchestration.verbs.history.use_case import history
from nemo_gym.orchestration.verbs.view import pages as view

CKPT = "/ckpt/run-a"
SWEEP = "gym-sweep-20261201T000000Z-5eeb01"
HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'


def ones(k: int, n: int = 12) -> list[float]:
    return [1.0] * k + [0.0] * (n - k)


def planted(url: str) -> None:
    """alpha: 6, 12, 0 of 12 tasks right at steps 100-300 (300 drops every task: flagged); beta: 6
    everywhere, step 200's written for 9 of its 12 samples (incomplete)."""
    entries = []
    for c, a in enumerate((6, 12, 0), 1):
        model = f"{CKPT}/step-{100 * c}"
        entries.append(entry(c, "alpha", ones(a), model=model, step=100 * c, sweep_id=SWEEP))
        beta = entry(c, "beta", ones(6), model=model, step=100 * c, sweep_id=SWEEP)
        entries.append(replace(beta, samples=9, complete=False) if c == 2 else beta)
    fill(url, entries)


def text_of(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store' / 'results.sqlite'}"


def test_the_page_words_the_history_as_gym_eval_history_does(url) -> None:
    planted(url)
    page = Viewer([], results_url=url).history_html(view.Links())
    shown = " ".join(text_of(page).split())
    cli = history_text(history(url)).splitlines()
    said = [line.strip() for line in cli if line.startswith(("best ", "regressions", "  alpha", "Each cell", "(k/n)"))]
    assert len(said) == 7  # the legends, three best lines, the heading, the one regression
    for line in said:
        assert " ".join(line.split()) in shown, line
    assert f"alpha at {CKPT}/step-300: -1.0000 against {CKPT}/step-200 (p 0.000488" in shown
    # The matrix: the best starred, the incomplete cell with its samples, the regressed cell outlined.
    assert '<td class="num h4 best">1.0000*</td>' in page
    assert "0.5000 (9/12)" in shown and 'class="num h0 partial">0.5000 (9/12)' in page
    assert '<td class="num h0 flagged">0.0000</td>' in page
    assert "<script" not in page  # the page runs nothing


def test_none_flagged_says_the_smallest_drop_it_could_have_seen(url) -> None:
    fill(url, [entry(c, "alpha", ones(6), model=f"{CKPT}/step-{100 * c}", step=100 * c) for c in (1, 2)])
    page = text_of(Viewer([], results_url=url).history_html(view.Links()))
    [cli_line] = [line.strip() for line in history_text(history(url)).splitlines() if "could show drops" in line]
    assert "regressions: none flagged (" in page and cli_line in " ".join(page.split())


def test_the_filters_select_as_the_cli_options_do(url) -> None:
    planted(url)
    fill(url, [entry(9, "alpha", ones(3), model="/ckpt/run-b/step-5", step=5)])
    viewer = Viewer([], results_url=url)
    only_b = text_of(viewer.history_html(view.Links(), {"model_prefix": ["/ckpt/run-b"]}))
    assert "/ckpt/run-b/step-5" in only_b and f"{CKPT}/step-100" not in only_b
    in_sweep = text_of(viewer.history_html(view.Links(), {"sweep": [SWEEP]}))
    assert f"{CKPT}/step-100" in in_sweep and "/ckpt/run-b" not in in_sweep
    none = text_of(viewer.history_html(view.Links(), {"sweep": ["gym-sweep-20260101T000000Z-000000"]}))
    assert "The store holds no entry of this selection; gym eval history import DIR... adds run directories" in none


@pytest.mark.parametrize(
    ("query", "line"),
    [
        ("sweep=abc%3Cb%3E", "sweep: 'abc<b>' is not a sweep id; give one such as gym-sweep-20261201T000000Z-5eeb01"),
        ("model_prefix=%2Fckpt%00x", "model_prefix: holds a control or formatting character; give a model path's"),
        ("model_prefix=" + "x" * 1001, "model_prefix: 1001 characters; give at most 1000"),
        (f"sweep={SWEEP}&sweep={SWEEP}", "sweep: given 2 times; give it once"),
    ],
)
def test_a_bad_filter_is_one_line_on_the_page_never_a_traceback(url, query, line) -> None:
    planted(url)
    server = serve(Viewer([], results_url=url), "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.server_address[1]}/history?{query}") as answer:
            page = answer.read().decode()
    finally:
        server.shutdown()
        server.server_close()
    [problem] = re.findall(r'<p class="problem">(.*?)</p>', page, re.S)
    assert html.unescape(problem).startswith(line)
    assert "Traceback" not in page and "<table" not in page


def test_a_store_turned_off_or_out_of_reach_is_one_line_with_the_fix(url) -> None:
    off = Viewer([]).history_html(view.Links())  # tests/conftest.py turns the store off
    [line] = re.findall(r'<p class="problem">(.*?)</p>', off, re.S)
    assert html.unescape(line).startswith("GYM_RESULTS_URL=off: the results store is turned off; give --results-url")
    away = Viewer([], results_url="postgresql+psycopg://gym:secret@127.0.0.1:1/gym").history_html(view.Links())
    [line] = re.findall(r'<p class="problem">(.*?)</p>', away, re.S)
    assert html.unescape(line).startswith("cannot reach the results store postgresql+psycopg://gym:***@127.0.0.1:1/gym")
    assert "start it, or name another with --results-url" in html.unescape(line) and "secret" not in away


def test_what_the_store_holds_is_escaped_and_shortened(url) -> None:
    model = HOSTILE + "/" + "x" * 4000 + "/step-1"
    fill(url, [entry(1, "alpha", ones(6), model=model, step=1)])
    page = Viewer([], results_url=url).history_html(view.Links())
    assert HOSTILE not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "x" * 100 not in page and "…" in page and "/step-1" in page
    assert len(page) < 20_000


def test_the_index_links_it_and_static_writes_it(url, own_index, tmp_path) -> None:
    planted(url)
    viewer = Viewer([], results_url=url)
    assert '<a href="/history">history</a>' in viewer.index_html(view.Links())
    written = write_static(viewer, str(tmp_path / "site"))
    assert tmp_path / "site" / "history.html" in written
    page = (tmp_path / "site" / "history.html").read_text()
    assert f"alpha at {CKPT}/step-300: -1.0000" in text_of(page) and "<form" not in page
