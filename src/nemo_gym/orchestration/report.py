"""``gym eval report``: several runs' results (a sweep's, typically) as one self-contained HTML file.

A view over the same objects ``results`` and ``compare`` print (``RunResults``, ``RunComparison``):
nothing here reads a file or asks the cluster. The page holds a run x benchmark table (the metric,
its completeness k/n, GPU-hours, wall time), a chart per benchmark of its metric across the runs,
and, when there are exactly two runs, their comparison (delta, confidence interval, verdict, and
the tasks that flipped). Charts are drawn by matplotlib as SVG, written into the page: the file
loads nothing from anywhere, so it can be mailed, archived or opened offline.

A sweep reads as a curve: when the runs' labels differ only in one number (``/ckpt/step-1000``,
``/ckpt/step-2000``; or numeric values of a swept key), that number is the x axis, in order.
"""

from __future__ import annotations

import io
import math
import re
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nemo_gym.orchestration.contract import Status
from nemo_gym.orchestration.display import matplotlib as shown
from nemo_gym.orchestration.display import terminal_text
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.sweep import run_labels, runs_title
from nemo_gym.orchestration.usage import hours_text, total, wall_text

if TYPE_CHECKING:
    from nemo_gym.orchestration.comparison import RunComparison
    from nemo_gym.orchestration.results import BenchmarkResult, RunResults

TEMPLATE = "report.html.j2"
MATPLOTLIB = "matplotlib>=3.7"
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
# Tasks named per direction in the comparison; the JSON of gym eval compare lists them all.
TASKS_NAMED = 30


def require_matplotlib() -> None:
    """The charts need matplotlib, an optional extra: say in one line how to get it."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise UserError(
            f"gym eval report draws its charts with matplotlib, which is not installed; {install_hint(MATPLOTLIB)}"
        ) from None


def install_hint(requirement: str) -> str:
    """How to add ``requirement`` to the environment this tool runs in, as it was installed: a
    ``uv tool`` or a ``pipx`` install has no pip of its own to run, a venv made by uv neither."""
    import importlib.util

    prefix = Path(sys.prefix)
    if (prefix / "uv-receipt.toml").is_file():
        return f"add it with: uv tool install --with '{requirement}' gym-orchestration (or the path or URL you installed it from)"
    if (prefix / "pipx_metadata.json").is_file():
        return f"add it with: pipx inject gym-orchestration '{requirement}'"
    if importlib.util.find_spec("pip") is None:
        return f"add it with: uv pip install --python {sys.executable} '{requirement}'"
    return f"add it with: {sys.executable} -m pip install '{requirement}'"


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


# -- the charts --------------------------------------------------------------------------------------


def benchmark_chart(benchmark: str, metric: str, axis: Axis, results: list[BenchmarkResult | None]) -> str:
    """One benchmark's metric across the runs, as an SVG element. A partial value is drawn hollow
    and marked with its k/n; a run without a value leaves a gap."""
    points = sorted(
        ((x, r.value, r) for x, r in zip(axis.positions, results) if r is not None and r.value is not None),
        key=lambda p: p[0],
    )

    def draw(ax: Any) -> bool:
        if not points:
            return False
        xs = [x for x, _, _ in points]
        ys = [y for _, y, _ in points]
        ax.plot(xs, ys, color="#2b6cb0", linewidth=2, zorder=1)
        for x, y, r in points:
            ax.scatter(
                [x],
                [y],
                s=42,
                zorder=2,
                color="#2b6cb0" if r.complete else "white",
                edgecolors="#2b6cb0",
                linewidths=1.6,
            )
            if not r.complete:
                ax.annotate(
                    r.samples_text(),
                    (x, y),
                    textcoords="offset points",
                    xytext=(0, 8),
                    ha="center",
                    fontsize=8,
                    color="#b7791f",
                )
        if all(0.0 <= y <= 1.0 for y in ys):
            ax.set_ylim(-0.05, 1.05)
        return True

    return chart_svg(benchmark, metric, axis, draw, f"gym-report-{benchmark}", (5.2, 3.2))


def chart_svg(
    benchmark: str, metric: str, axis: Axis, draw: Any, salt: str, size: tuple[float, float] = (5.2, 3.2)
) -> str:
    """A benchmark's chart as an SVG element: ``draw(ax)`` puts the data on it (False when it had
    none: the chart says so); the axes, labels and look are every chart's. ``salt`` keeps the SVG's
    ids apart between the charts of one page, and the same from one drawing to the next."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context(
        {
            "svg.fonttype": "none",
            "svg.hashsalt": salt,
            "font.size": 10,
            "axes.spines.top": False,
            "axes.spines.right": False,
        }
    ):
        fig = Figure(figsize=size, dpi=100)  # two side by side on a laptop's screen
        ax = fig.subplots()
        if not draw(ax):
            ax.text(0.5, 0.5, shown(f"no {metric} scores yet"), transform=ax.transAxes, ha="center", color="#718096")
        ax.set_xticks(
            axis.positions,
            [shown(t) for t in axis.ticks],
            rotation=20 if any(len(t) > 8 for t in axis.ticks) else 0,
            ha="right" if any(len(t) > 8 for t in axis.ticks) else "center",
        )
        ax.set_xlabel(shown(axis.title))
        ax.set_ylabel(shown(metric))
        ax.set_title(shown(benchmark), loc="left", fontweight="bold")
        ax.grid(axis="y", color="#e2e8f0")
        ax.set_axisbelow(True)
        buffer = io.StringIO()
        fig.savefig(buffer, format="svg", bbox_inches="tight", metadata={"Date": None})
    svg = buffer.getvalue()
    return svg[svg.index("<svg") :]  # the element only: no XML declaration or DOCTYPE inside HTML


# -- the page ----------------------------------------------------------------------------------------


def report_html(
    runs: list[RunResults],
    metric: str,
    comparison: RunComparison | None = None,
    now: datetime | None = None,
    sweep_size: int | None = None,
) -> str:
    """The whole page, one string: everything it shows is in it (``sweep_size``: how many runs the
    runs' sweep has, when they are one sweep's, so that a page of some says so)."""
    import jinja2

    require_matplotlib()
    labels = run_labels([run.record for run in runs])
    benchmarks: list[str] = []
    for run in runs:
        benchmarks += [r.benchmark for r in run.benchmarks if r.benchmark not in benchmarks]
    found = [{r.benchmark: r for r in run.benchmarks} for run in runs]
    axis = x_axis(labels.header, labels.labels)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).with_name("templates"))),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        finalize=_shown_in_html,
    )
    page: dict[str, Any] = {
        "title": runs_title([run.record for run in runs], sweep_size),
        "generated": (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC"),
        "metric": metric,
        "header": labels.header,
        "benchmarks": benchmarks,
        "rows": [
            {
                "label": label,
                "run": run,
                "cells": [_cell(f.get(name)) for name in benchmarks],
                "hours": hours_text(run.usage),
                "wall": wall_text(run.usage),
            }
            for label, run, f in zip(labels.labels, runs, found)
        ],
        "total_hours": hours_text(total(run.usage for run in runs)),
        "total_wall": wall_text(total(run.usage for run in runs)),
        "charts": [
            {"benchmark": name, "svg": benchmark_chart(name, metric, axis, [f.get(name) for f in found])}
            for name in benchmarks
        ],
        "comparison": _comparison_view(comparison, labels.labels) if comparison is not None else None,
    }
    return env.get_template(TEMPLATE).render(page=page)


def _shown_in_html(value: Any) -> Any:
    """Every text the page shows, with its control and bidi characters escaped (the page escapes
    markup itself); the charts, marked safe, were drawn from labels escaped already."""
    import markupsafe

    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return terminal_text(value)
    return value


def _cell(result: BenchmarkResult | None) -> dict[str, str]:
    """A table cell: the value, its samples and why it is partial; a partial cell is shaded."""
    if result is None:
        return {"value": "–", "samples": "not in this run", "css": "absent", "note": ""}
    value = "–" if result.value is None else f"{result.value:.4f}"
    return {
        "value": value,
        "samples": f"{result.samples_text()} samples" + "".join(f", {why}" for why in _partial_because(result)),
        "css": "complete" if result.complete else "partial",
        "note": result.note or "",
    }


def _partial_because(result: BenchmarkResult) -> list[str]:
    """What the cell says of a partial value: ``incomplete``, ``6 unscored``, ``completeness unknown``."""
    if result.complete:
        return []
    why: list[str] = [] if result.state == Status.SUCCEEDED else [result.state]
    if result.unscoreable:
        why.append(f"{len(result.unscoreable)} unscored")
    if result.complete is None:
        why.append("completeness unknown")
    return why or ["partial"]


def _comparison_view(comparison: RunComparison, labels: list[str]) -> dict[str, Any]:
    def number(value: float | None, signed: bool = False) -> str:
        return "–" if value is None else (f"{value:+.4f}" if signed else f"{value:.4f}")

    def tasks(found: tuple[int, ...]) -> str:
        shown = ", ".join(map(str, found[:TASKS_NAMED]))
        return shown + (f" and {len(found) - TASKS_NAMED} more" if len(found) > TASKS_NAMED else "")

    rows = []
    for b in comparison.benchmarks:
        p = b.paired
        rows.append(
            {
                "benchmark": b.benchmark,
                "tasks": p.n,
                "base": number(p.base_mean),
                "candidate": number(p.candidate_mean),
                "delta": number(p.delta, True),
                "ci": "–" if p.ci is None else f"[{p.ci[0]:+.4f}, {p.ci[1]:+.4f}]",
                "p": "–" if p.p_value is None else f"{p.p_value:.3g}",
                "verdict": p.verdict,
                "css": p.verdict.replace(" ", "-"),
                "up": tasks(p.improved_tasks),
                "down": tasks(p.regressed_tasks),
                "flags": list(b.flags),
            }
        )
    return {
        "base": labels[0],
        "candidate": labels[1],
        "rows": rows,
        "only_in_base": list(comparison.only_in_base),
        "only_in_candidate": list(comparison.only_in_candidate),
    }
