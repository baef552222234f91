"""A history's words, written once for ``gym eval history`` and the view's history page: the
legends, a cell (``0.5000*``, ``0.0000 (9/12)``), the best checkpoints, the regressions flagged and,
where none is, how small a drop the pairs tested could have shown. Pure: the leaderboard and the
judgement of ``store.history`` and ``store.regressions`` in, text out. Each model's path is shown by
the caller's ``shown`` (the terminal cuts a long one by its two ends, the page too), each benchmark's
name by its ``named`` (whole on the terminal, shortened on the page); the page's
template escapes every text (it all comes from the store: untrusted).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nemo_gym.orchestration.stats import Correction
    from nemo_gym.orchestration.store.history import Checkpoint, Leaderboard
    from nemo_gym.orchestration.store.regressions import Detectable, Regression

Shown = Callable[[str], str]


def whole(text: str) -> str:
    """A name shown as it is (the terminal's lines; the page shortens a benchmark's name)."""
    return text


LEGEND = (
    "Each cell: the newest run's mean over tasks; *: the best of its benchmark; SUITE: the mean over every benchmark"
)
PARTIAL_LEGEND = (
    "(k/n): samples written of those expected, where a benchmark did not write them all: never the best, never "
    "judged a regression"
)
EMPTY = "The store holds no entry of this selection; gym eval history import DIR... adds run directories"
NO_PAIR = "no pair to test: no checkpoint has one before it scored on the same tasks"


def axis_text(board: Leaderboard) -> str:
    """Which axis orders the series: the step, or (no checkpoint numbered) the time each was first submitted."""
    if board.by_time:
        return "axis: time (no checkpoint has a step number: each in the order it was first submitted, UTC)"
    if board.unnumbered:
        return (
            f"axis: step (job.training_step, else the number the model's path ends in); {board.unnumbered} "
            f"checkpoint(s) without one follow, in the order first submitted"
        )
    return "axis: step (job.training_step, else the number the model's path ends in)"


def axis_header(board: Leaderboard) -> str:
    """The axis' column: ``STEP``, or ``TIME`` (UTC)."""
    return "TIME" if board.by_time else "STEP"


def value_text(value: float | None, starred: bool = False) -> str:
    """``0.5000``, ``0.5000*`` for the best of its benchmark, ``-`` for none."""
    return "-" if value is None else f"{value:.4f}{'*' if starred else ''}"


def samples_text(checkpoint: Checkpoint, benchmark: str) -> str:
    """``(9/12)`` where the benchmark did not write every sample it expected; else nothing."""
    entry = checkpoint.cells.get(benchmark)
    if entry is None or not entry.partial:
        return ""
    expected = "?" if entry.expected_samples is None else entry.expected_samples
    return f"({entry.samples}/{expected})"


def cell_text(checkpoint: Checkpoint, benchmark: str, starred: bool) -> str:
    """A cell: ``0.5000*``, and where its benchmark did not write every sample, ``0.5000 (9/12)``."""
    samples = samples_text(checkpoint, benchmark)
    text = value_text(checkpoint.value(benchmark), starred)
    return f"{text} {samples}" if samples else text


def any_partial(board: Leaderboard) -> bool:
    return any(c.partial(b) for c in board.checkpoints for b in board.benchmarks)


def best_text(benchmark: str, best: Checkpoint, shown: Shown, named: Shown = whole) -> str:
    """``best B: MODEL (0.7500)``."""
    return f"best {named(benchmark)}: {shown(best.model)} ({value_text(best.value(benchmark))})"


def best_lines(board: Leaderboard, shown: Shown, named: Shown = whole) -> list[str]:
    """``best B: MODEL (0.7500)`` per benchmark with one, and ``best over the suite: ...``."""
    lines = []
    for benchmark in board.benchmarks:
        best = board.best(benchmark)
        if best is not None:
            lines.append(best_text(benchmark, best, shown, named))
    top = board.best_over_suite()
    if top is not None:
        lines.append(f"best over the suite: {shown(top.model)} (mean {value_text(top.suite_mean(board.benchmarks))})")
    return lines


def method(correction: Correction, alpha: float) -> str:
    return (
        f"each checkpoint against the one before it, paired over tasks; every pair of the history judged "
        f"together ({correction.label}, alpha {alpha:g})"
    )


def none_flagged(correction: Correction, alpha: float) -> str:
    return f"regressions: none flagged ({method(correction, alpha)})"


def flagged_heading(correction: Correction, alpha: float) -> str:
    return f"regressions ({method(correction, alpha)}):"


def regression_text(regression: Regression, shown: Shown, named: Shown = whole) -> str:
    """``B at MODEL: -1.0000 against MODEL (p 0.000488, adjusted 0.000977 over 2 pair(s))``."""
    r = regression
    return (
        f"{named(r.benchmark)} at {shown(r.checkpoint.model)}: {r.delta:+.4f} against {shown(r.against.model)} "
        f"(p {r.p_value:.3g}, adjusted {r.adjusted_p:.3g} over {r.family} pair(s))"
    )


def detectable_text(seen: Detectable | None, shown: Shown, named: Shown = whole) -> str:
    """How small a drop "none flagged" could have seen: compare's DETECTABLE, over every pair tested."""
    if seen is None:
        return NO_PAIR
    where = f"{named(seen.benchmark)} at {shown(seen.checkpoint.model)}"
    return (
        f"the data could show drops of {seen.every_pair:.4f} or more on each of the {seen.pairs} pair(s) tested, "
        f"{seen.smallest:.4f} on the most sensitive ({where}); {seen.power:.0%} of the time, at the history's level "
        f"(alpha over every pair tested), as gym eval compare's DETECTABLE"
    )
