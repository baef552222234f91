"""The tables the report (``verbs/report/page.py``) and the view (``verbs/view/pages.py``) show, worded once: the sweep
table (a row per run, a cell per benchmark), where each run sits on a chart's x axis, and a
comparison's rows. Pure data from ``results``' and ``comparison``'s objects: every text worded and
every number formatted here, so a fact reads the same on every page; the pages lay them out, and
their templates escape them (Jinja2 with autoescape: all of it may come from a run directory).

The words: a value ``0.5000`` (``–`` when there is none); a cell's samples ``9/12 samples,
incomplete`` (why a value is partial after the comma), ``not in this run`` when the run lacks the
benchmark; a comparison's delta and interval signed, ``+0.5000`` and ``[+0.2500, +0.7500]``; its p
as the test gave it and, for a family of benchmarks, as adjusted (the verdict is read off that);
the flipped tasks as ``improved`` and ``regressed``, like the verdicts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nemo_gym.orchestration.contract import Status
from nemo_gym.orchestration.stats import IMPROVED, REGRESSED, Correction
from nemo_gym.orchestration.sweep import run_labels
from nemo_gym.orchestration.usage import hours_text, total, wall_text

if TYPE_CHECKING:
    from nemo_gym.orchestration.comparison import BenchmarkComparison, RunComparison
    from nemo_gym.orchestration.results import BenchmarkResult, RunResults

NONE = "–"  # a number there is none of
NOT_IN_RUN = "not in this run"
# Flipped tasks named per direction; the JSON of gym eval compare lists them all.
TASKS_NAMED = 30
ALL_LISTED = "gym eval compare --json lists them all"
# A comparison's numbers, in the order every table of one shows them.
COMPARISON_COLUMNS = ("tasks", "base", "candidate", "delta", "95% CI", "p")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def number(value: float | None, signed: bool = False) -> str:
    """A metric's value: ``0.5000``; ``+0.5000`` when ``signed`` (a delta); ``–`` when there is none."""
    if value is None:
        return NONE
    return f"{value:+.4f}" if signed else f"{value:.4f}"


def interval(ci: tuple[float, float] | None) -> str:
    """A delta's confidence interval: ``[-0.1250, +0.2500]``."""
    return NONE if ci is None else f"[{number(ci[0], True)}, {number(ci[1], True)}]"


def p_text(comparison: BenchmarkComparison) -> str:
    """``0.012``; ``0.012 (adjusted 0.036)`` when the benchmarks were judged as a family, with a correction."""
    raw = comparison.paired.p_value
    if raw is None:
        return NONE
    if comparison.family <= 1 or comparison.adjusted_p is None or comparison.correction == Correction.NONE:
        return f"{raw:.3g}"
    return f"{raw:.3g} (adjusted {comparison.adjusted_p:.3g})"


def more_text(more: int, what: str = "") -> str:
    """``and 5 more (gym eval compare --json lists them all)``; ``what`` names them."""
    return f"and {more} more{f' {what}' if what else ''} ({ALL_LISTED})"


def task_list(tasks: tuple[int, ...], named: int = TASKS_NAMED) -> str:
    """``0, 1, 2``; the first ``named`` and how many more; ``none``."""
    if not tasks:
        return "none"
    shown = ", ".join(map(str, tasks[:named]))
    return shown + (f" {more_text(len(tasks) - named)}" if len(tasks) > named else "")


# -- the sweep table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """A run's value of a benchmark: its value, its samples and why it is partial; ``css`` is
    ``complete``, ``partial`` (shaded) or ``absent``; ``note`` why the numbers are not to be trusted."""

    value: str
    samples: str
    css: str
    note: str = ""


def cell(result: BenchmarkResult | None) -> Cell:
    if result is None:
        return Cell(NONE, NOT_IN_RUN, "absent")
    why = "".join(f", {reason}" for reason in partial_because(result))
    return Cell(
        number(result.value),
        f"{result.samples_text()} samples{why}",
        "complete" if result.complete else "partial",
        result.note or "",
    )


def partial_because(result: BenchmarkResult) -> list[str]:
    """Why a value is partial: ``incomplete`` (or the job's state), ``6 unscored``, ``completeness unknown``."""
    if result.complete:
        return []
    why: list[str] = [] if result.state == Status.SUCCEEDED else [str(result.state)]
    if result.unscoreable:
        why.append(f"{len(result.unscoreable)} unscored")
    if result.complete is None:
        why.append("completeness unknown")
    return why or ["partial"]


@dataclass(frozen=True)
class SweepRow:
    label: str  # what the run is called in this table (a swept value, a model, its id)
    run_id: str
    directory: str
    cells: list[Cell]  # one per benchmark of the table, in its order
    hours: str  # GPU-hours
    wall: str


@dataclass(frozen=True)
class SweepTable:
    """Several runs x their benchmarks (every benchmark any run has, in first-seen order)."""

    header: str  # what the runs' labels are: the swept keys, ``model`` or ``RUN``
    benchmarks: list[str]
    rows: list[SweepRow]
    total_hours: str
    total_wall: str
    results: list[dict[str, BenchmarkResult]]  # per run, by benchmark: for the charts

    @property
    def labels(self) -> list[str]:
        return [row.label for row in self.rows]

    def across(self, benchmark: str) -> list[BenchmarkResult | None]:
        """A benchmark's result in each run, in the rows' order (None where a run lacks it)."""
        return [found.get(benchmark) for found in self.results]


def sweep_table(runs: list[RunResults]) -> SweepTable:
    labels = run_labels([run.record for run in runs])
    benchmarks: list[str] = []
    for run in runs:
        benchmarks += [r.benchmark for r in run.benchmarks if r.benchmark not in benchmarks]
    found = [{r.benchmark: r for r in run.benchmarks} for run in runs]
    rows = [
        SweepRow(
            label,
            run.record.gym_job_id,
            run.record.run_dir,
            [cell(f.get(name)) for name in benchmarks],
            hours_text(run.usage),
            wall_text(run.usage),
        )
        for label, run, f in zip(labels.labels, runs, found)
    ]
    usage = total(run.usage for run in runs)
    return SweepTable(labels.header, benchmarks, rows, hours_text(usage), wall_text(usage), found)


# -- the x axis --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    """Where each run sits on a chart's x axis, and what the axis is called."""

    title: str
    positions: list[float]
    ticks: list[str]
    numeric: bool  # positions are the runs' own numbers (a curve); else the runs in order


def x_axis(header: str, labels: list[str]) -> Axis:
    """The runs' labels as numbers when they are (``0.5``, ``1e-5``), or when they differ only in
    one number (``/ckpt/step-1000`` ... ``/ckpt/step-3000``: 1000 ... 3000); else in order."""
    named = "" if header == "RUN" else header
    numbers = [_float(label) for label in labels]
    if len(labels) > 1 and all(n is not None for n in numbers):
        return Axis(named or "value", [float(n) for n in numbers if n is not None], labels, True)
    varying = _one_varying_number(labels)
    if varying is not None:
        positions, template = varying
        title = f"{named}: {_short(template)}" if named else _short(template)
        return Axis(title, positions, [f"{x:g}" for x in positions], True)
    return Axis(named or "run", [float(i) for i in range(len(labels))], [_short(label) for label in labels], False)


def _float(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _one_varying_number(labels: list[str]) -> tuple[list[float], str] | None:
    """(each label's number, the labels' common text with N for it) when they differ in one number only."""
    if len(labels) < 2:
        return None
    templates = {_NUMBER.sub("#", label) for label in labels}
    if len(templates) != 1:
        return None
    found = [_NUMBER.findall(label) for label in labels]
    varying = [i for i in range(len(found[0])) if len({f[i] for f in found}) > 1]
    if len(varying) != 1:
        return None
    at = varying[0]
    pieces = next(iter(templates)).split("#")
    shown = [*(f"{p}{found[0][i]}" if i != at else f"{p}N" for i, p in enumerate(pieces[:-1])), pieces[-1]]
    return [float(f[at]) for f in found], "".join(shown)


def _short(label: str, width: int = 28) -> str:
    return label if len(label) <= width else "…" + label[-(width - 1) :]


# -- a comparison ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ComparisonRow:
    """A benchmark of two runs compared; ``numbers`` in ``COMPARISON_COLUMNS``' order."""

    benchmark: str
    numbers: tuple[str, ...]
    verdict: str  # improved, regressed, no significant change, no common tasks
    css: str  # the verdict, hyphenated
    improved: tuple[int, ...]  # the tasks that flipped up
    regressed: tuple[int, ...]
    improved_text: str  # ``0, 1, 2``, ``none``, the first TASKS_NAMED and how many more
    regressed_text: str
    flags: tuple[str, ...]  # why the comparison may be weaker than it looks


@dataclass(frozen=True)
class ComparisonTable:
    title: str  # ``candidate against base``
    base: str
    candidate: str
    rows: list[ComparisonRow]
    not_compared: list[str]  # ``only in the base run, not compared: a, b``
    method: str  # how the numbers were reached, in a sentence
    columns: tuple[str, ...] = COMPARISON_COLUMNS  # what each of a row's numbers is


def comparison_row(compared: BenchmarkComparison) -> ComparisonRow:
    p = compared.paired
    numbers = (str(p.n), number(p.base_mean), number(p.candidate_mean), number(p.delta, True), interval(p.ci))
    return ComparisonRow(
        benchmark=compared.benchmark,
        numbers=(*numbers, p_text(compared)),
        verdict=compared.verdict,
        css=compared.verdict.replace(" ", "-"),
        improved=p.improved_tasks,
        regressed=p.regressed_tasks,
        improved_text=task_list(p.improved_tasks),
        regressed_text=task_list(p.regressed_tasks),
        flags=compared.flags,
    )


def comparison_table(comparison: RunComparison, base: str, candidate: str) -> ComparisonTable:
    """``base`` and ``candidate``: what the page calls the two runs."""
    not_compared = [
        f"only in the {role} run, not compared: {', '.join(names)}"
        for role, names in (("base", comparison.only_in_base), ("candidate", comparison.only_in_candidate))
        if names
    ]
    return ComparisonTable(
        f"{candidate} against {base}",
        base,
        candidate,
        [comparison_row(b) for b in comparison.benchmarks],
        not_compared,
        method(comparison),
    )


def method(comparison: RunComparison) -> str:
    """The comparison's method in a sentence, with how its verdicts are read off the p-values."""
    alpha = f"{comparison.benchmarks[0].paired.alpha:g}" if comparison.benchmarks else "0.05"
    verdicts = (
        f"the benchmarks' p-values adjusted together ({comparison.correction.label}'s correction); {IMPROVED} or "
        f"{REGRESSED} when the adjusted p is below {alpha}"
        if comparison.correction != Correction.NONE
        else f"{IMPROVED} or {REGRESSED} when p is below {alpha}"
    )
    return (
        "Paired by task index over the tasks both runs have: a 95% interval of the mean delta and a p-value "
        "(McNemar's exact test for 0/1 scores, a paired t-test otherwise, a sign-flip permutation test for "
        f"few tasks); {verdicts}."
    )
