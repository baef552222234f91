"""The view's history page: the results store's checkpoints x benchmarks, as ``gym eval history``
prints them (``verbs/history/words.py`` words both): each benchmark's series down its column, a heat map
shading each value within its column's range, the best of each benchmark starred, incomplete cells
with their samples, the regressions flagged (their cells outlined) or, with none, how small a drop
the pairs tested could have shown. Below the table, each benchmark's curve over the series' axis
(the step, or the time first submitted where no checkpoint has a step), the best and the flagged
regressions marked on it (``verbs/view/curves.py``: inline SVG, drawn by the template). Filtered by
``model_prefix`` and ``sweep`` (the CLI's ``--model-prefix`` and ``--sweep``), given as query
parameters and checked here: a bad one is one line on the page naming the parameter and the fix.

Everything shown comes from the store, written by anyone who can write to it: each text is escaped
by the template (autoescape), names are shortened for display and the table is bounded. The page
runs no script; a wide table scrolls in its box under a sticky header and beside a sticky first
column (CSS only).
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nemo_gym.orchestration.runid import SWEEP_ID_RE
from nemo_gym.orchestration.verbs.history import words
from nemo_gym.orchestration.verbs.view import curves

if TYPE_CHECKING:
    from nemo_gym.orchestration.store.history import Checkpoint, Leaderboard
    from nemo_gym.orchestration.verbs.history.use_case import History
    from nemo_gym.orchestration.verbs.view.pages import Links

MODEL_SHOWN = 80  # characters of a model's path shown (its two ends)
BENCHMARK_SHOWN = 40
CHECKPOINTS_SHOWN = 500  # rows of the table; the rest said in a line
BENCHMARKS_SHOWN = 200
CURVES_SHOWN = 100  # benchmarks drawn as curves (each over the checkpoints the table shows)
REGRESSIONS_SHOWN = 200
PREFIX_LIMIT = 1000
HEAT_STEPS = 5  # shades of a column's range
PARAMETERS = ("model_prefix", "sweep")
REGRESSED_LEGEND = "outlined in red: a flagged regression (listed below the table)"


@dataclass(frozen=True)
class HistoryQuery:
    """The page's filters; None: any."""

    model_prefix: str | None = None
    sweep: str | None = None

    def as_params(self) -> dict[str, str]:
        return {k: v for k, v in (("model_prefix", self.model_prefix), ("sweep", self.sweep)) if v}


def parse_query(query: dict[str, list[str]]) -> tuple[HistoryQuery, str]:
    """The filters a request asks for, and the problem with them ('' when none): the first
    parameter that is given twice, too long, holds a control character, or is no sweep id."""
    for name in PARAMETERS:
        if len(query.get(name) or []) > 1:
            return HistoryQuery(), f"{name}: given {len(query[name])} times; give it once"
    prefix = (query.get("model_prefix") or [""])[0] or None
    sweep = (query.get("sweep") or [""])[0] or None
    problem = _prefix_problem(prefix) or _sweep_problem(sweep)
    return (HistoryQuery(), problem) if problem else (HistoryQuery(prefix, sweep), "")


def _prefix_problem(prefix: str | None) -> str:
    if prefix is None:
        return ""
    if len(prefix) > PREFIX_LIMIT:
        return f"model_prefix: {len(prefix)} characters; give at most {PREFIX_LIMIT} (a model path's beginning, e.g. /ckpt/run-a/)"
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in prefix):
        return "model_prefix: holds a control or formatting character; give a model path's beginning as written"
    return ""


def _sweep_problem(sweep: str | None) -> str:
    if sweep is None or SWEEP_ID_RE.fullmatch(sweep):
        return ""
    return (
        f"sweep: {shortened(sweep, 60)!r} is not a sweep id; give one such as gym-sweep-20261201T000000Z-5eeb01 "
        f"(gym eval list shows them), or none for every sweep"
    )


def shortened(text: str, limit: int) -> str:
    """``text`` as shown: at most ``limit`` characters, a longer one by its two ends around '…'."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    return f"{text[:head]}…{text[len(text) - (limit - 1 - head) :]}"


def _model(label: str) -> str:
    return shortened(label, MODEL_SHOWN)


def _benchmark(name: str) -> str:
    return shortened(name, BENCHMARK_SHOWN)


def history_page(found: History | None, asked: HistoryQuery, problem: str, links: Links) -> str:
    """The page: the table of ``found``, or ``problem`` (a bad filter, a store off or unreachable) in one line."""
    from nemo_gym.orchestration.verbs.view.pages import Page, render

    body: dict[str, Any] = {
        "problem": problem,
        "form": not links.static,
        "action": links.history(),
        "model_prefix": asked.model_prefix or "",
        "sweep": asked.sweep or "",
        "empty": "",
    }
    if found is not None and not problem:
        body.update(_history_body(found) if found.board.checkpoints else {"empty": words.EMPTY})
    return render("view-history.html.j2", links, Page("History", body))


def _history_body(found: History) -> dict[str, Any]:
    board = found.board
    flagged = {(id(r.checkpoint), r.benchmark) for r in found.regressions}
    legend = [words.LEGEND] + ([words.PARTIAL_LEGEND] if words.any_partial(board) else [])
    regressions = [words.regression_text(r, _model, _benchmark) for r in found.regressions[:REGRESSIONS_SHOWN]]
    return {
        "axis": words.axis_text(board),
        "axis_header": words.axis_header(board).capitalize(),
        "curves": _curves(found),
        "curves_more": _more_curves(len(board.benchmarks)),
        "legend": legend + ([REGRESSED_LEGEND] if found.regressions else []),
        "benchmarks": [_benchmark(b) for b in board.benchmarks[:BENCHMARKS_SHOWN]],
        "rows": _rows(board, flagged),
        "more": _more(board),
        "best": words.best_lines(board, _model, _benchmark),
        "flagged": bool(found.regressions),
        "heading": (words.flagged_heading if found.regressions else words.none_flagged)(found.correction, found.alpha),
        "regressions": regressions + _more_regressions(len(found.regressions)),
        "detectable": "" if found.regressions else words.detectable_text(found.detectable, _model, _benchmark),
    }


def _rows(board: Leaderboard, flagged: set[tuple[int, str]]) -> list[dict[str, Any]]:
    benchmarks = board.benchmarks[:BENCHMARKS_SHOWN]
    best = {b: board.best(b) for b in benchmarks}
    shades = {b: _shading(board, b) for b in benchmarks}
    return [
        {
            "model": _model(c.model),
            "step": board.position_text(c),
            "cells": [_cell(c, b, best[b] is c, shades[b], (id(c), b) in flagged) for b in benchmarks],
            "suite": words.value_text(c.suite_mean(board.benchmarks)),
        }
        for c in board.checkpoints[:CHECKPOINTS_SHOWN]
    ]


def _cell(c: Checkpoint, benchmark: str, best: bool, shade: tuple[float, float], regressed: bool) -> dict[str, str]:
    value = c.value(benchmark)
    css = ["num"]
    if value is not None and math.isfinite(value):
        css.append(f"h{_heat(value, *shade)}")
    css += [name for name, on in (("partial", c.partial(benchmark)), ("best", best), ("flagged", regressed)) if on]
    return {"text": words.cell_text(c, benchmark, best), "css": " ".join(css)}


def _shading(board: Leaderboard, benchmark: str) -> tuple[float, float]:
    """The range a benchmark's column is shaded over: its lowest and highest value."""
    values = [v for c in board.checkpoints if (v := c.value(benchmark)) is not None and math.isfinite(v)]
    return (min(values), max(values)) if values else (0.0, 0.0)


def _heat(value: float, low: float, high: float) -> int:
    """Its shade, 0 to HEAT_STEPS - 1, within its column's range (by halves: a range from -1e308 to
    1e308, which anyone writing the store can make, does not overflow)."""
    span = high / 2 - low / 2
    return min(HEAT_STEPS - 1, int((value / 2 - low / 2) / span * HEAT_STEPS)) if span > 0 else 0


def _more(board: Leaderboard) -> list[str]:
    lines = []
    if len(board.checkpoints) > CHECKPOINTS_SHOWN:
        lines.append(f"and {len(board.checkpoints) - CHECKPOINTS_SHOWN} more checkpoints")
    if len(board.benchmarks) > BENCHMARKS_SHOWN:
        lines.append(f"and {len(board.benchmarks) - BENCHMARKS_SHOWN} more benchmarks")
    return [
        f"{line}: narrow it by model prefix or sweep, or read them all with gym eval history --json" for line in lines
    ]


def _curves(found: History) -> curves.Curves:
    board = found.board
    return curves.curves(
        board,
        board.checkpoints[:CHECKPOINTS_SHOWN],
        board.benchmarks[:CURVES_SHOWN],
        found.regressions,
        _model,
        _benchmark,
    )


def _more_curves(count: int) -> list[str]:
    more = count - CURVES_SHOWN
    return [f"and {more} more benchmarks, in the table (narrow it by model prefix or sweep)"] if more > 0 else []


def _more_regressions(count: int) -> list[str]:
    more = count - REGRESSIONS_SHOWN
    return [f"and {more} more (gym eval history --json lists them all)"] if more > 0 else []
