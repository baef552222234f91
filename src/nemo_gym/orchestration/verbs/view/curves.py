"""The history page's curves (pure): per benchmark, its score over the series' axis — the step, or
the time each checkpoint was first submitted where none has a step (``store.history.series_order``)
— as the numbers of an inline SVG the page's template draws: no script, nothing fetched, the page
works offline.

The line joins the checkpoints that wrote every sample, in the series' order; one that did not is a
hollow point off the line (never the best, never judged, as in the table). The best checkpoint is
``Leaderboard.best``'s, a star; each regression is one ``gym eval history`` flagged
(``store.regressions``' judgement, handed in, never judged again here): a red segment from the
checkpoint it was judged against to a red ring at its own. Every curve shares the x axis (one
series' order); each has its own y range, as each column of the heat map is shaded within its own.

Only numbers are made here; every text (a benchmark's name, a model's path, a tooltip) goes to the
template as text, which escapes it. Values the store holds that are not finite are not drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from nemo_gym.orchestration.verbs.history import words

if TYPE_CHECKING:
    from nemo_gym.orchestration.store.history import Checkpoint, Leaderboard
    from nemo_gym.orchestration.store.regressions import Regression

WIDTH, HEIGHT = 360, 210  # each curve's box, in pixels
LEFT, RIGHT, TOP, BOTTOM = 52, 22, 10, 38  # the plot's margins inside it: tick labels, the axis' title
TICKS = 5  # about so many ticks on each axis
TIME_TICKS = 3
DAY = 86400.0
STEP_TITLE = "step"
TIME_TITLE = "time first submitted (UTC)"


@dataclass(frozen=True)
class Tick:
    at: str  # the pixel it is drawn at (x on the x axis, y on the y axis)
    text: str
    anchor: str = "middle"  # which of the label's points is there (an x tick's; the last time's ends there)


@dataclass(frozen=True)
class Mark:
    x: str
    y: str
    title: str  # its tooltip: the page's words for it


@dataclass(frozen=True)
class Drop:
    """A flagged regression: from the checkpoint it was judged against to its own."""

    x1: str
    y1: str
    x2: str
    y2: str
    title: str


@dataclass(frozen=True)
class Curve:
    benchmark: str  # as shown (shortened by the caller)
    line: str  # the polyline's points, ``x,y x,y ...``: the complete checkpoints in order
    partial: list[Mark]
    best: Mark | None
    star: str  # the best's star, a polygon's points
    drops: list[Drop]
    y_ticks: list[Tick]


@dataclass(frozen=True)
class Curves:
    axis_title: str  # STEP_TITLE or TIME_TITLE
    x_ticks: list[Tick]
    curves: list[Curve]
    not_drawn: str  # the checkpoints shown in the table that have no place on the axis, said; else ''

    @property
    def frame(self) -> dict[str, int]:
        """The box and the plot inside it, in pixels, for the template."""
        return {
            "width": WIDTH,
            "height": HEIGHT,
            "left": LEFT,
            "right": WIDTH - RIGHT,
            "top": TOP,
            "bottom": HEIGHT - BOTTOM,
            "middle": (LEFT + WIDTH - RIGHT) // 2,
        }


@dataclass(frozen=True)
class _Scale:
    low: float
    high: float
    start: float  # the pixels it maps onto
    end: float

    def at(self, value: float) -> float:
        # Halves: a range from -1e308 to 1e308 (the store is written by anyone) does not overflow.
        span = self.high / 2 - self.low / 2
        share = 0.5 if span <= 0 else (value / 2 - self.low / 2) / span
        return self.start + share * (self.end - self.start)


def curves(
    board: Leaderboard,
    checkpoints: list[Checkpoint],
    benchmarks: list[str],
    found: list[Regression],
    shown: words.Shown,
    named: words.Shown,
) -> Curves:
    """A curve per benchmark of ``benchmarks`` over ``checkpoints`` (the table's, in its order);
    ``found``: the regressions flagged; ``shown``/``named``: a model's path, a benchmark's name as shown."""
    where = {id(c): at for c in checkpoints if (at := _position(board, c)) is not None}
    xs = list(where.values())
    pad = (DAY / 24 if board.by_time else 1.0) if xs and max(xs) == min(xs) else 0.0
    x = _Scale(min(xs, default=0.0) - pad, max(xs, default=1.0) + pad, LEFT, WIDTH - RIGHT)
    ticks = _time_ticks(x) if board.by_time else _ticks(x)
    drawn = [c for c in checkpoints if id(c) in where]
    return Curves(
        TIME_TITLE if board.by_time else STEP_TITLE,
        ticks,
        [_curve(board, drawn, b, x, where, found, shown, named) for b in benchmarks],
        _not_drawn(board, len(checkpoints) - len(drawn)),
    )


def _position(board: Leaderboard, checkpoint: Checkpoint) -> float | None:
    if board.by_time:
        return None if checkpoint.time is None else checkpoint.time.timestamp()
    return None if checkpoint.step is None else float(checkpoint.step)


def _not_drawn(board: Leaderboard, count: int) -> str:
    if not count:
        return ""
    if board.by_time:
        return f"{count} checkpoint(s) whose submission time the store does not hold as a time are not drawn"
    return f"{count} checkpoint(s) without a step number are not on this axis (the table lists them last)"


def _curve(
    board: Leaderboard,
    drawn: list[Checkpoint],
    benchmark: str,
    x: _Scale,
    where: dict[int, float],
    found: list[Regression],
    shown: words.Shown,
    named: words.Shown,
) -> Curve:
    values = {id(c): v for c in drawn if (v := c.value(benchmark)) is not None and math.isfinite(v)}
    y = _y_scale(list(values.values()))

    def mark(c: Checkpoint, title: str) -> Mark:
        return Mark(_px(x.at(where[id(c)])), _px(y.at(values[id(c)])), title)

    on_line = [mark(c, "") for c in drawn if id(c) in values and not c.partial(benchmark)]
    partial = [
        mark(c, f"{shown(c.model)}: {words.cell_text(c, benchmark, False)}")
        for c in drawn
        if id(c) in values and c.partial(benchmark)
    ]
    best = board.best(benchmark)
    top = mark(best, words.best_text(benchmark, best, shown, named)) if best and id(best) in values else None
    drops = [
        Drop(a.x, a.y, b.x, b.y, words.regression_text(r, shown, named))
        for r in found
        if r.benchmark == benchmark and id(r.checkpoint) in values and id(r.against) in values
        for a, b in [(mark(r.against, ""), mark(r.checkpoint, ""))]
    ]
    line = " ".join(f"{m.x},{m.y}" for m in on_line)
    return Curve(named(benchmark), line, partial, top, _star(top), drops, _ticks(y))


def _y_scale(values: list[float]) -> _Scale:
    """The benchmark's own range, a little wider; one value (or none) in the middle of a range of 0.1."""
    low, high = min(values, default=0.0), max(values, default=1.0)
    pad = (high / 2 - low / 2) * 0.16 if high > low else 0.05
    if not math.isfinite(low - pad) or not math.isfinite(high + pad):
        pad = 0.0
    return _Scale(low - pad, high + pad, HEIGHT - BOTTOM, TOP)


def _ticks(scale: _Scale) -> list[Tick]:
    """Round values (1, 2, 2.5 or 5 times a power of ten apart) within the scale's range."""
    span = scale.high - scale.low
    if not math.isfinite(span) or span <= 0:
        return [Tick(_px(scale.at(v)), _number(v)) for v in {scale.low, scale.high}]
    raw = span / TICKS
    power = 10.0 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1.0, 2.0, 2.5, 5.0, 10.0) if m * power >= raw)
    first = math.ceil(scale.low / step)
    values = [(first + i) * step for i in range(TICKS * 3) if (first + i) * step <= scale.high + step * 1e-9]
    return [Tick(_px(scale.at(v)), _number(v)) for v in values]


def _time_ticks(scale: _Scale) -> list[Tick]:
    """The first and last times and one between: dates over days, else month-day hour:minute."""
    form = "%Y-%m-%d" if scale.high - scale.low >= 3 * DAY else "%m-%d %H:%M"
    at = [scale.low + (scale.high - scale.low) * i / (TIME_TICKS - 1) for i in range(TIME_TICKS)]
    return [Tick(_px(scale.at(t)), _time(t, form), "end" if t == at[-1] else "middle") for t in at]


def _time(seconds: float, form: str) -> str:
    try:
        return datetime.fromtimestamp(seconds, timezone.utc).strftime(form)
    except (ValueError, OverflowError, OSError):  # a padded end past the calendar's (year 1 or 9999)
        return ""


def _star(top: Mark | None) -> str:
    """A five-pointed star around the best point."""
    if top is None:
        return ""
    cx, cy = float(top.x), float(top.y)
    corners = [
        (cx + r * math.sin(math.pi * k / 5), cy - r * math.cos(math.pi * k / 5))
        for k in range(10)
        for r in [7.0 if k % 2 == 0 else 3.0]
    ]
    return " ".join(f"{_px(a)},{_px(b)}" for a, b in corners)


def _number(value: float) -> str:
    """A tick's label: ``0.55``, ``1500``; a huge one in three digits."""
    if abs(value) >= 1e9:
        return f"{value:.3g}"
    return f"{round(value, 9):g}" if value != int(value) else str(int(value))


def _px(value: float) -> str:
    return f"{value:.1f}"
