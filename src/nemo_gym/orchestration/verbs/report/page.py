"""``gym eval report``: several runs' results (a sweep's, typically) as one self-contained HTML file.

A view over the same objects ``results`` and ``compare`` print (``RunResults``, ``RunComparison``),
in the tables ``result_tables`` words for the report and the view alike: nothing here reads a file
or asks the cluster. The page holds a run x benchmark table (the metric,
its completeness k/n, GPU-hours, wall time), a chart per benchmark of its metric across the runs,
and, when there are exactly two runs, their comparison (delta, confidence interval, verdict, and
the tasks that flipped). Charts are drawn by matplotlib as SVG, written into the page: the file
loads nothing from anywhere, so it can be mailed, archived or opened offline.

A sweep reads as a curve: when the runs' labels differ only in one number (``/ckpt/step-1000``,
``/ckpt/step-2000``; or numeric values of a swept key), that number is the x axis, in order
(``result_tables.x_axis``).
"""

from __future__ import annotations

import io
import sys
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nemo_gym.orchestration import display
from nemo_gym.orchestration.display import matplotlib as shown
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.result_tables import Axis, comparison_table, sweep_table, x_axis
from nemo_gym.orchestration.sweep import runs_title

if TYPE_CHECKING:
    from nemo_gym.orchestration.comparison import RunComparison
    from nemo_gym.orchestration.results import BenchmarkResult, RunResults

TEMPLATE = "report.html.j2"
MATPLOTLIB = "matplotlib>=3.7"


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
    require_matplotlib()
    table = sweep_table(runs)
    axis = x_axis(table.header, table.labels)
    page: dict[str, Any] = {
        "title": runs_title([run.record for run in runs], sweep_size),
        "generated": (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC"),
        "metric": metric,
        "table": table,
        "charts": [
            {"benchmark": name, "svg": benchmark_chart(name, metric, axis, table.across(name))}
            for name in table.benchmarks
        ],
        "comparison": comparison_table(comparison, *table.labels[:2]) if comparison is not None else None,
    }
    return html_pages().get_template(TEMPLATE).render(page=page)


@lru_cache(maxsize=1)
def html_pages() -> Any:
    """The Jinja2 environment of the report's and the view's pages: every value escaped as markup
    (autoescape) and stripped of control and bidi characters (``display.html``); an undefined name
    is an error."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(Path(__file__).parents[2] / "templates")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        finalize=display.html,
    )
