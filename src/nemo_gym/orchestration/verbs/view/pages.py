"""``gym eval view``'s pages: HTML from the objects ``status``, ``results`` and ``compare`` return and
the samples ``samples.py`` reads — nothing here reads a run's files or asks a cluster.

Every text a run wrote (a benchmark's name, a metric's, a prompt, a response, a swept value) is
escaped by the templates (Jinja2 with autoescape) and stripped of control and bidi characters; the
pages run no script and load nothing from anywhere (the server says so in its Content-Security-
Policy), so they can be served live or written as files (``--static``) to share or archive.
Charts are matplotlib's SVG, as the report's.
"""

from __future__ import annotations

import math
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from nemo_gym.orchestration import samples as sample_rows
from nemo_gym.orchestration.contract import Status
from nemo_gym.orchestration.result_tables import (
    NONE,
    Axis,
    cell,
    comparison_table,
    more_text,
    number,
    sweep_table,
    x_axis,
)
from nemo_gym.orchestration.stats import IMPROVED, REGRESSED
from nemo_gym.orchestration.usage import hours_text, wall_text
from nemo_gym.orchestration.verbs.report.page import chart_svg, html_pages

if TYPE_CHECKING:
    from nemo_gym.orchestration.comparison import RunComparison
    from nemo_gym.orchestration.library.observing import RunStatus
    from nemo_gym.orchestration.record import SubmissionRecord, SweepRecord
    from nemo_gym.orchestration.results import BenchmarkResult, RunResults

# While anything shown is queued or running, a live page refreshes itself this often.
REFRESH_SECONDS = 10
# Flipped tasks shown side by side per benchmark (the JSON of gym eval compare lists them all).
FLIPPED_SHOWN = 40


# -- where a page links to --------------------------------------------------------------------------


@dataclass(frozen=True)
class Links:
    """The URL of each page: served (``/run/ID``) or written as files beside each other (``run-ID.html``)."""

    static: bool = False

    def index(self) -> str:
        return "index.html" if self.static else "/"

    def run(self, run_id: str) -> str:
        return f"run-{_file(run_id)}.html" if self.static else f"/run/{_path(run_id)}"

    def sweep(self, sweep_id: str) -> str:
        return f"sweep-{_file(sweep_id)}.html" if self.static else f"/sweep/{_path(sweep_id)}"

    def samples(self, run_id: str, benchmark: str, start: int = 0, reward: str = "", query: str = "") -> str:
        if self.static:
            return f"samples-{_file(run_id)}-{_file(benchmark)}-{start}.html"
        query_string = urllib.parse.urlencode(
            {k: v for k, v in {"start": start, "reward": reward, "q": query}.items() if v}
        )
        return f"/samples/{_path(run_id)}/{_path(benchmark)}" + (f"?{query_string}" if query_string else "")

    def history(self, model_prefix: str = "", sweep: str = "") -> str:
        """The results store's history page; served, filtered by the query's model prefix and sweep."""
        if self.static:
            return "history.html"
        query_string = urllib.parse.urlencode(
            {k: v for k, v in {"model_prefix": model_prefix, "sweep": sweep}.items() if v}
        )
        return "/history" + (f"?{query_string}" if query_string else "")

    def compare(self, base: str, candidate: str) -> str:
        if self.static:
            return f"compare-{_file(base)}-{_file(candidate)}.html"
        return f"/compare/{_path(base)}/{_path(candidate)}"


def _path(part: str) -> str:
    return urllib.parse.quote(part, safe="")


def _file(part: str) -> str:
    """A name as a file name: what is not a letter, digit, '.', '_' or '-' becomes '_'."""
    return "".join(ch if ch.isascii() and (ch.isalnum() or ch in "._-") else "_" for ch in part)[:120]


# -- the pages --------------------------------------------------------------------------------------


def key_of(record: SubmissionRecord, copied: bool = False) -> str:
    """What a run's pages are named by: its id (with its directory's name for a copy of a run
    that stands beside another copy)."""
    if not copied:
        return record.gym_job_id
    return f"{record.gym_job_id}~{_file(Path(record.run_dir.rstrip('/')).name)}"


@dataclass(frozen=True)
class RunEntry:
    """A run on the index page."""

    record: SubmissionRecord
    summary: str  # its jobs' states, in a few words
    live: bool  # a job of it is queued or running


@dataclass(frozen=True)
class SweepEntry:
    sweep: SweepRecord
    runs: list[RunEntry]


@dataclass
class Page:
    title: str
    body: dict[str, Any] = field(default_factory=dict)
    live: bool = False


def index_page(sweeps: list[SweepEntry], runs: list[RunEntry], links: Links) -> str:
    from nemo_gym.orchestration.sweep import run_labels, short_keys

    live = any(entry.live for entry in runs) or any(e.live for s in sweeps for e in s.runs)
    sweep_rows = [
        {
            "link": links.sweep(entry.sweep.sweep_id),
            "id": entry.sweep.sweep_id,
            "runs": len(entry.sweep.runs),
            "swept": ", ".join(short_keys(entry.sweep.swept).values()),
            "states": _states_of([run.summary for run in entry.runs]),
            "watching": entry.sweep.watch.directory if entry.sweep.watch else "",
            "submitted": entry.sweep.submitted_at[:19].replace("T", " "),
        }
        for entry in sweeps
    ]
    labels = run_labels([entry.record for entry in runs]).labels if runs else []
    run_rows = [
        {
            "link": links.run(entry.record.gym_job_id),
            "id": entry.record.gym_job_id,
            "state": entry.summary or "unknown",
            "model": entry.record.model or "",
            "swept": label if entry.record.sweep_values else "",
            "benchmarks": ", ".join(b.benchmark for b in entry.record.benchmarks),
            "submitted": entry.record.submitted_at[:19].replace("T", " "),
            "sweep": links.sweep(entry.record.sweep_id) if entry.record.sweep_id else "",
        }
        for entry, label in zip(runs, labels)
    ]
    return render("view-index.html.j2", links, Page("gym eval view", {"sweeps": sweep_rows, "runs": run_rows}, live))


def run_page(run: RunResults, status: RunStatus, links: Links, siblings: list[SubmissionRecord]) -> str:
    record = run.record
    live = not status.final
    states = {job.benchmark: job for job in status.jobs}
    rows = []
    for result in run.benchmarks:
        job = states.get(result.benchmark)
        rows.append(
            {
                "benchmark": result.benchmark,
                "state": job.state if job else result.state,
                "detail": job.detail if job else "",
                "cell": cell(result),
                "hours": hours_text(result.usage),
                "wall": wall_text(result.usage),
                "link": links.samples(record.gym_job_id, result.benchmark),
                "metrics": [(name, f"{value:.4g}") for name, value in sorted(result.metrics.items())[:40]],
            }
        )
    compare = [
        {"label": other.gym_job_id, "link": links.compare(other.gym_job_id, record.gym_job_id)}
        for other in siblings
        if other.gym_job_id != record.gym_job_id
    ]
    body = {
        "record": record,
        "swept": [(key, value) for key, value in record.sweep_values.items()],
        "rows": rows,
        "metric": run.benchmarks[0].metric if run.benchmarks else "",
        "sweep": links.sweep(record.sweep_id) if record.sweep_id else "",
        "compare": compare,
    }
    return render("view-run.html.j2", links, Page(f"Run {record.gym_job_id}", body, live))


def sweep_page(sweep_id: str, runs: list[RunResults], statuses: list[RunStatus], metric: str, links: Links) -> str:
    table = sweep_table(runs)
    axis = x_axis(table.header, table.labels)
    curves = [_curve(name, metric, axis, table.across(name)) for name in table.benchmarks]
    best = [c["best_run"] for c in curves if c["best_run"] is not None]
    first = runs[0].record.gym_job_id if runs else ""
    compare = (
        {"link": links.compare(first, runs[best[0]].record.gym_job_id), "label": table.labels[best[0]]}
        if best and runs[best[0]].record.gym_job_id != first
        else None
    )
    body = {
        "table": table,
        "states": [status.summary for status in statuses],
        "run_links": [links.run(row.run_id) for row in table.rows],
        "curves": curves,
        "metric": metric,
        "compare_best": compare,
        "first": table.labels[0] if table.labels else "",
    }
    return render("view-sweep.html.j2", links, Page(f"Sweep {sweep_id}", body, any(not s.final for s in statuses)))


def samples_page(
    record: SubmissionRecord, benchmark: str, page: sample_rows.Page, reward: str, query: str, links: Links
) -> str:
    rid = record.gym_job_id
    body = {
        "record": record,
        "benchmark": benchmark,
        "samples": [_sample(s) for s in page.samples],
        "start": page.start,
        "reward": reward,
        "query": query,
        "filters": [(value or "all", value) for value in sample_rows.REWARD_FILTERS],
        "previous": links.samples(rid, benchmark, max(0, page.start - sample_rows.PAGE_SIZE), reward, query)
        if page.start
        else "",
        "next": links.samples(rid, benchmark, page.start + len(page.samples), reward, query) if page.more else "",
        "run": links.run(rid),
        "form": not links.static,
        "action": links.samples(rid, benchmark),
    }
    return render("view-samples.html.j2", links, Page(f"{benchmark} of {rid}", body))


def compare_page(
    comparison: RunComparison,
    base: SubmissionRecord,
    candidate: SubmissionRecord,
    rows: dict[str, tuple[dict[int, list[sample_rows.Sample]], dict[int, list[sample_rows.Sample]]]],
    links: Links,
) -> str:
    """Two runs side by side: per benchmark the paired statistics, then each flipped task with
    both runs' responses and rewards (``rows``: benchmark -> (base's, candidate's) samples by task)."""
    table = comparison_table(comparison, base.gym_job_id, candidate.gym_job_id)
    body = {
        "base": base,
        "candidate": candidate,
        "base_link": links.run(base.gym_job_id),
        "candidate_link": links.run(candidate.gym_job_id),
        "table": table,
        "flipped": [_flipped(row.improved, row.regressed, rows.get(row.benchmark, ({}, {}))) for row in table.rows],
    }
    return render("view-compare.html.j2", links, Page(table.title, body))


def _flipped(
    improved: tuple[int, ...],
    regressed: tuple[int, ...],
    samples: tuple[dict[int, list[sample_rows.Sample]], dict[int, list[sample_rows.Sample]]],
) -> dict[str, Any]:
    """A benchmark's flipped tasks, the first FLIPPED_SHOWN with both runs' samples, and how many more."""
    base_rows, candidate_rows = samples
    flipped = [(IMPROVED, t) for t in improved] + [(REGRESSED, t) for t in regressed]
    tasks = [
        {
            "task": task,
            "direction": direction,
            "base": [_sample(s) for s in base_rows.get(task, [])],
            "candidate": [_sample(s) for s in candidate_rows.get(task, [])],
        }
        for direction, task in flipped[:FLIPPED_SHOWN]
    ]
    more = len(flipped) - FLIPPED_SHOWN
    return {"tasks": tasks, "more": more_text(more, "flipped tasks") if more > 0 else ""}


def message_page(title: str, text: str, links: Links) -> str:
    """A page that says one thing (a run that is not here, a refusal)."""
    return render("view-message.html.j2", links, Page(title, {"text": text}))


# -- pieces -----------------------------------------------------------------------------------------


def _sample(sample: sample_rows.Sample) -> dict[str, Any]:
    return {
        "line": sample.line,
        "task": NONE if sample.task is None else sample.task,
        "rollout": NONE if sample.rollout is None else sample.rollout,
        "reward": NONE if sample.reward is None else f"{sample.reward:g}",
        "css": "unscored" if sample.reward is None else ("passed" if sample.reward > 0 else "failed"),
        "prompt": sample.prompt,
        "response": sample.response,
        "extras": list(sample.extras),
        "unreadable": sample.unreadable,
    }


def _states_of(summaries: list[str]) -> str:
    counts: dict[str, int] = {}
    for summary in summaries:
        counts[summary or "unknown"] = counts.get(summary or "unknown", 0) + 1
    return ", ".join(f"{n} {state}" for state, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def _curve(benchmark: str, metric: str, axis: Axis, results: list[BenchmarkResult | None]) -> dict[str, Any]:
    """A benchmark's metric across the sweep, each point with the 95 % bootstrap interval of its
    mean over tasks (a band), the best point marked; the chart as SVG."""
    from nemo_gym.orchestration.stats import bootstrap_mean_ci

    points = []
    for i, (x, result) in enumerate(zip(axis.positions, results)):
        if result is None or result.value is None:
            continue
        scores = [s for s in result.task_means.values() if math.isfinite(s)]
        low, high = bootstrap_mean_ci(scores, resamples=2000) if scores else (result.value, result.value)
        points.append((x, result.value, low, high, i, result.complete is True))
    points.sort()
    # The best checkpoint: the highest mean among the complete ones (a partial mean is not to be trusted).
    trusted = [p for p in points if p[5]] or points
    best = max(trusted, key=lambda p: (p[1], -p[0])) if trusted else None
    return {
        "benchmark": benchmark,
        "svg": _chart_svg(benchmark, metric, axis, points, best),
        "best_run": best[4] if best else None,
        "best": axis.ticks[best[4]] if best and axis.numeric is False else (f"{best[0]:g}" if best else ""),
        "best_value": number(best[1]) if best else "",
    }


def _chart_svg(benchmark: str, metric: str, axis: Axis, points: list, best: tuple | None) -> str:
    """The curve, each point's band, the best starred; a partial point hollow."""

    def draw(ax: Any) -> bool:
        if not points:
            return False
        xs = [p[0] for p in points]
        ax.fill_between(xs, [p[2] for p in points], [p[3] for p in points], color="#bee3f8", alpha=0.8, zorder=0)
        ax.plot(xs, [p[1] for p in points], color="#2b6cb0", linewidth=2, zorder=1)
        colors = ["#2b6cb0" if p[5] else "white" for p in points]
        ax.scatter(xs, [p[1] for p in points], s=36, zorder=2, color=colors, edgecolors="#2b6cb0")
        if best is not None:
            ax.scatter([best[0]], [best[1]], s=160, marker="*", color="#d69e2e", zorder=3, label="best")
            ax.legend(loc="lower right", frameon=False)
        if all(p[2] >= 0.0 and p[3] <= 1.0 for p in points):
            ax.set_ylim(-0.05, 1.05)
        return True

    return chart_svg(benchmark, metric, axis, draw, f"gym-view-{benchmark}", (5.6, 3.3))


# -- rendering --------------------------------------------------------------------------------------


def render(template: str, links: Links, page: Page) -> str:
    return html_pages().get_template(template).render(page=page, links=links, refresh=REFRESH_SECONDS, Status=Status)
