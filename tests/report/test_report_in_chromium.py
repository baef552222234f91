"""The report in a real headless Chromium: it loads with no request beyond its own file and no
console error, and its charts are drawn (their screenshots are mostly ink where the data is, not a
blank page). The report is of real results: the quickstart's NeMo Gym run copied to three
checkpoint-like directories with changed rewards (tests/checkpoint_runs.py)."""

from __future__ import annotations

import pytest
from browser import LINE_BLUE, ink, open_report
from checkpoint_runs import checkpoint_runs

from nemo_gym.orchestration.cli.main import main

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _its_own_index(own_index) -> None:
    """tests/conftest.py's own_index, for every test here."""


def test_a_three_checkpoint_report_loads_offline_and_draws_its_curve(tmp_path, capsys) -> None:
    out = tmp_path / "report.html"
    assert main(["eval", "report", *map(str, checkpoint_runs(tmp_path)), "-o", str(out)]) == 0
    seen = open_report(out, screenshot=tmp_path / "page.png")
    assert seen.requests == [seen.url]
    assert seen.console_errors == []
    [chart] = seen.charts
    assert ink(chart) > 0.03  # axes, ticks, labels and the line: far from a blank box (its border alone is < 1 %)
    assert ink(chart, near=LINE_BLUE) > 0.002  # the curve itself
    assert "step-3000" in seen.text and "9/12 samples, incomplete" in seen.text


def test_a_two_run_report_shows_their_comparison(tmp_path) -> None:
    base, candidate, _ = checkpoint_runs(tmp_path)
    out = tmp_path / "report.html"
    assert main(["eval", "report", str(base), str(candidate), "-o", str(out)]) == 0
    seen = open_report(out)
    assert seen.requests == [seen.url] and seen.console_errors == []
    assert "step-2000 against step-1000" in seen.text and "improved" in seen.text
