"""The view's history page without a browser (tests/view/test_view_in_chromium.py loads it in one):
the store's checkpoints x benchmarks in the words of ``gym eval history`` (the same best lines,
regression lines and detectable drop), incomplete cells marked, regressed cells outlined; filtered
by model prefix and sweep; a bad filter, a store turned off or out of reach, one line on the page;
what the store holds escaped and shortened; written by --static and linked from the index. The
curves: each benchmark's points read back through its axis' ticks, its best starred, the regression
gym eval history flagged drawn in its words; the time axis where no checkpoint has a step; hostile
names as text, the SVG still well formed."""

from __future__ import annotations

import html
import math
import re
import threading
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from history_store import entry, fill

from nemo_gym.orchestration.library import Viewer, serve, write_static
from nemo_gym.orchestration.store import open_store
from nemo_gym.orchestration.store.schema import entries
from nemo_gym.orchestration.verbs.history.command import history_text
from nemo_gym.orchestration.verbs.history.use_case import history
from nemo_gym.orchestration.verbs.view import pages as view
from nemo_gym.orchestration.verbs.view.history_page import shortened

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


# -- the curves ---------------------------------------------------------------------------------------


def curves_of(page: str) -> dict[str, ET.Element]:
    """Each curve's SVG by its caption (as the page shows it), parsed as XML: the template writes it so."""
    found = {}
    for caption, svg in re.findall(
        r'<figure class="chart curve">\s*<figcaption>(.*?)</figcaption>\s*(<svg.*?</svg>)', page, re.S
    ):
        found[html.unescape(caption)] = ET.fromstring(svg)
    return found


def scale(ticks: list[ET.Element], coordinate: str) -> Callable[[float], float]:
    """A pixel back to its value, through two of the axis' labelled ticks."""
    (p0, v0), (p1, v1) = [(float(t.get(coordinate) or 0), float(t.text or 0)) for t in (ticks[0], ticks[-1])]
    return lambda pixel: v0 + (pixel - p0) * (v1 - v0) / (p1 - p0)


def points_of(svg: ET.Element) -> list[tuple[float, float]]:
    """The line's points as (step, value), read back through the ticks."""
    x = scale(svg.findall(".//text[@class='xtick']"), "x")
    y = scale(svg.findall(".//text[@class='ytick']"), "y")
    [line] = svg.findall(".//polyline[@class='series']")
    pairs = [p.split(",") for p in (line.get("points") or "").split()]
    return [(round(x(float(a))), round(y(float(b)), 3)) for a, b in pairs]


def at_value(svg: ET.Element, x: str, y: str) -> tuple[float, float]:
    to_x = scale(svg.findall(".//text[@class='xtick']"), "x")
    to_y = scale(svg.findall(".//text[@class='ytick']"), "y")
    return round(to_x(float(x))), round(to_y(float(y)), 3)


def test_each_benchmark_s_curve_has_its_points_its_best_and_its_regression(url) -> None:
    planted(url)
    page = Viewer([], results_url=url).history_html(view.Links())
    curves = curves_of(page)
    assert list(curves) == ["alpha", "beta"]
    alpha, beta = curves["alpha"], curves["beta"]
    assert points_of(alpha) == [(100, 0.5), (200, 1.0), (300, 0.0)]
    [star] = alpha.findall(".//polygon[@class='best']")
    assert star.findtext("title") == f"best alpha: {CKPT}/step-200 (1.0000)"
    [drop] = alpha.findall(".//g[@class='regression']")
    [segment] = drop.findall("line")
    assert at_value(alpha, segment.get("x1") or "", segment.get("y1") or "") == (200, 1.0)
    assert at_value(alpha, segment.get("x2") or "", segment.get("y2") or "") == (300, 0.0)
    cli = [line.strip() for line in history_text(history(url)).splitlines() if line.startswith("  alpha at ")]
    assert [drop.findtext("title")] == cli  # the regression gym eval history flagged, in its words
    # beta: step 200 wrote 9 of its 12 samples: off the line, hollow, never the best (step 100, the earliest of equals).
    assert points_of(beta) == [(100, 0.5), (300, 0.5)]
    [hollow] = beta.findall(".//circle[@class='partial']")
    assert at_value(beta, hollow.get("cx") or "", hollow.get("cy") or "") == (200, 0.5)
    assert hollow.findtext("title") == f"{CKPT}/step-200: 0.5000 (9/12)"
    assert beta.findtext(".//polygon[@class='best']/title") == f"best beta: {CKPT}/step-100 (0.5000)"
    assert beta.findall(".//g[@class='regression']") == []
    assert [t.text for t in alpha.findall(".//text[@class='axis']")] == ["step"]
    assert "axis: step (job.training_step, else the number the model's path ends in)" in text_of(page)


def test_checkpoints_without_a_step_are_drawn_over_the_time_first_submitted(url) -> None:
    """Three models with no step number, submitted c (all right), a (none right), b (half): the
    table and the curve in that order, the axis time, a's drop flagged against c."""
    entries = [
        replace(entry(i, "alpha", ones(k), model=f"/models/{name}", step=0), step=None)
        for i, (name, k) in enumerate((("c", 12), ("a", 0), ("b", 6)), 1)
    ]
    fill(url, entries)
    page = Viewer([], results_url=url).history_html(view.Links())
    shown = text_of(page)
    assert "axis: time (no checkpoint has a step number: each in the order it was first submitted, UTC)" in shown
    assert re.findall(r'<td class="model">(.*?)</td><td class="num">(.*?)</td>', page) == [
        ("/models/c", "2026-12-01T00:00:01Z"),
        ("/models/a", "2026-12-01T00:00:02Z"),
        ("/models/b", "2026-12-01T00:00:03Z"),
    ]
    [alpha] = curves_of(page).values()
    assert [t.text for t in alpha.findall(".//text[@class='axis']")] == ["time first submitted (UTC)"]
    [line] = alpha.findall(".//polyline[@class='series']")
    xs = [float(p.split(",")[0]) for p in (line.get("points") or "").split()]
    ys = [float(p.split(",")[1]) for p in (line.get("points") or "").split()]
    assert xs == sorted(xs) and len(set(xs)) == 3  # c, a, b along time
    assert ys[1] > ys[2] > ys[0]  # a lowest on the page (largest y), c highest
    assert alpha.findtext(".//g[@class='regression']/title", "").startswith(
        "alpha at /models/a: -1.0000 against /models/c"
    )
    assert [t.text for t in alpha.findall(".//text[@class='xtick']")][0] == "12-01 00:00"


def test_a_mix_draws_the_numbered_and_says_the_others_are_not_on_the_axis(url) -> None:
    fill(url, [entry(1, "alpha", ones(6), model=f"{CKPT}/step-100", step=100)])
    fill(url, [replace(entry(2, "alpha", ones(3), model="/models/base", step=0), step=None)])
    page = Viewer([], results_url=url).history_html(view.Links())
    assert "1 checkpoint(s) without a step number are not on this axis (the table lists them last)" in text_of(page)
    [alpha] = curves_of(page).values()
    assert points_of(alpha)[0][1] == 0.5 and len(points_of(alpha)) == 1


def test_the_curves_show_what_the_store_holds_as_text(url) -> None:
    """A benchmark's name and a model's path holding markup: in the caption, the tooltips and the
    label, escaped; the SVG still well formed; nothing run."""
    bench = "b" + HOSTILE
    models = [f"{HOSTILE}/step-{100 * c}" for c in (1, 2, 3)]
    fill(url, [entry(c, bench, ones(k), model=models[c - 1], step=100 * c) for c, k in ((1, 6), (2, 12), (3, 0))])
    page = Viewer([], results_url=url).history_html(view.Links())
    assert HOSTILE not in page and "<script" not in page and "<img" not in page
    [(caption, svg)] = curves_of(page).items()
    assert caption == shortened(bench, 40)
    assert svg.get("aria-label") == f"{shortened(bench, 40)}: score over the step"
    assert svg.findtext(".//polygon[@class='best']/title") == f"best {shortened(bench, 40)}: {models[1]} (1.0000)"
    regression = svg.findtext(".//g[@class='regression']/title") or ""
    assert regression.startswith(f"{shortened(bench, 40)} at {models[2]}: -1.0000")
    assert points_of(svg) == [(100, 0.5), (200, 1.0), (300, 0.0)]


def test_a_value_that_is_not_finite_is_not_drawn_and_huge_ones_stay_in_the_box(url) -> None:
    """The store is written by anyone: a value of 1e308, one of -1e308 and an infinite one beside an
    ordinary one: the page made all the same, the three finite ones drawn inside the box."""
    fill(url, [entry(c, "alpha", ones(6), model=f"{CKPT}/step-{100 * c}", step=100 * c) for c in (1, 2, 3, 4)])
    store = open_store(url)
    try:
        with store.engine.begin() as conn:
            conn.execute(entries.update().where(entries.c.run_id.like("%000001")).values(value=1e308))
            conn.execute(entries.update().where(entries.c.run_id.like("%000002")).values(value=-1e308))
            conn.execute(entries.update().where(entries.c.run_id.like("%000004")).values(value=math.inf))
    finally:
        store.close()
    [svg] = curves_of(Viewer([], results_url=url).history_html(view.Links())).values()
    [line] = svg.findall(".//polyline[@class='series']")
    ys = [float(p.split(",")[1]) for p in (line.get("points") or "").split()]
    assert len(ys) == 3 and all(0 <= y <= 210 for y in ys)
