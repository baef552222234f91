"""``gym eval results``: one run's results, or several runs side by side (a sweep, or runs named
one by one): a row per run, labelled by its swept values, a column per benchmark."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from nemo_gym.orchestration.cli.common import add_json_flag, add_metric_option, add_run_selector, selected, table
from nemo_gym.orchestration.display import echo

if TYPE_CHECKING:
    from nemo_gym.orchestration.library import BenchmarkResult, RunResults, Usage

# Missing (task, rollout) pairs and unscoreable rows named in the table's notes; --json lists more.
MISSING_NAMED = 10


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "results",
        help="a run's results, or several runs side by side",
        description="Every benchmark's results: samples against the expected ones, the metric, GPU-hours. "
        "With several runs (a sweep), a run x benchmark table of the metric. Exits 1 when any benchmark is "
        "not complete: failed, incomplete, its completeness unknown (no readable list of the expected samples: "
        "complete is null in --json), or its value partial (rows whose metric is NaN, infinite, a string or absent).",
    )
    add_run_selector(p, several=True)
    add_metric_option(p, "the per-rollout metric to show")
    add_json_flag(p, "each run's results (values, completeness, gym's metrics, missing samples)")
    p.set_defaults(handler=run_results)


def run_results(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import DEFAULT_METRIC, feed_store, results, results_json

    runs = results(selected(args).records, args.metric)
    if args.json:
        print(results_json(runs))
    elif len(runs) == 1:
        echo(run_text(runs[0]))
    else:
        echo(sweep_text(runs, args.metric or DEFAULT_METRIC))
    feed_store(runs)  # after the output: a slow store never delays it, and a failing one is a warning
    return 0 if all(run.complete is True for run in runs) else 1


def value_text(result: BenchmarkResult, with_samples: bool) -> str:
    """``0.6667``; a partial one says so: ``0.5000 (9/12)``, ``0.5000 (partial)``, ``0.5000 (12/12, 3
    unscored)``, ``0.5000 (unknown)`` (completeness unknown); ``-`` without a value."""
    if result.value is None:
        return f"{result.state} ({result.samples_text()})" if result.partial and with_samples else "-"
    text = f"{result.value:.4f}"
    if not result.partial:
        return text
    unscored = f", {len(result.unscoreable)} unscored" if result.unscoreable else ""
    if with_samples:
        return f"{text} ({result.samples_text()}{unscored})"
    return f"{text} ({'unknown' if result.complete is None else 'partial'}{unscored})"


def run_text(run: RunResults) -> str:
    from nemo_gym.orchestration.library import headline, hours_text, wall_text

    rows = []
    for r in run.benchmarks:
        metrics = (
            ", ".join(f"{k}={v:.4g}" for k, v in headline(r.metrics, r.key_metrics)) if r.complete else (r.note or "")
        )
        rows.append(
            [
                r.benchmark,
                r.state,
                r.samples_text(),
                value_text(r, False),
                hours_text(r.usage),
                wall_text(r.usage),
                metrics,
            ]
        )
    metric = run.benchmarks[0].metric if run.benchmarks else "value"
    lines = [f"Run {run.record.gym_job_id}: {run.record.run_dir}"]
    lines.append(
        f"{metric.upper()}: the mean over tasks of each task's mean {metric}; SAMPLES: rollouts written of those "
        "expected (tasks x repeats); METRICS: gym's own aggregate"
    )
    lines.append(table(["BENCHMARK", "STATE", "SAMPLES", metric.upper(), "GPU-HOURS", "WALL", "METRICS"], rows))
    for r in run.benchmarks:
        lines += [f"  {r.benchmark}: {line}" for line in notes(r)]
    lines.append(total_line(run.usage, run.record.executor))
    for r in run.benchmarks:
        lines += [f"  {r.benchmark}: {path}" for path in r.files]
    return "\n".join(lines)


def notes(result: BenchmarkResult) -> list[str]:
    from nemo_gym.orchestration.library import UNSCOREABLE_LISTED

    out = []
    if result.missing:
        out.append("missing " + named([f"task {t} rollout {r}" for t, r in result.missing], "--json lists all"))
    if result.unscoreable:
        listed = f"--json lists the first {UNSCOREABLE_LISTED}"
        out.append(f"no {result.metric!r} score: " + named([u.text() for u in result.unscoreable], listed))
    if result.complete and result.note:  # a complete result's caveats (duplicates); partial ones are in the table
        out.append(result.note)
    return out


def named(items: list[str], where_all: str) -> str:
    """The first MISSING_NAMED items, and how many more (and where to see them)."""
    more = len(items) - MISSING_NAMED
    return ", ".join(items[:MISSING_NAMED]) + (f", and {more} more ({where_all})" if more > 0 else "")


def total_line(total: Usage, executor: str) -> str:
    """The run's GPU-hours and wall time, and where they come from (the ``executor`` backend's
    accounts, or the jobs' own records)."""
    from nemo_gym.orchestration.library import SOURCE_NONE, hours_text, usage_source_text, wall_text

    if total.source == SOURCE_NONE:
        return "Total: no job has started yet"
    where = usage_source_text(total, executor)
    guessed = "; ~: a job ended without its end record, counted to its last sign of life" if total.approximate else ""
    return f"Total: {hours_text(total)} GPU-hours, {wall_text(total)} wall ({where}{guessed})"


def sweep_text(runs: list[RunResults], metric: str) -> str:
    """A row per run (named by its swept values), a column per benchmark, then what each run cost."""
    from nemo_gym.orchestration.library import hours_text, run_labels, runs_title, sweep_size, wall_text

    names: list[str] = []
    for run in runs:
        names += [r.benchmark for r in run.benchmarks if r.benchmark not in names]
    labels = run_labels([run.record for run in runs])
    rows = []
    for label, run in zip(labels.labels, runs):
        found = {r.benchmark: r for r in run.benchmarks}
        cells = [value_text(found[name], True) if name in found else "-" for name in names]
        rows.append([label, *cells, hours_text(run.usage), wall_text(run.usage)])
    lines = []
    records = [run.record for run in runs]
    if any(r.sweep_id for r in records):
        lines.append(runs_title(records, sweep_size(records)))
    lines.append(f"{metric}: mean over tasks; (k/n): samples written of those expected, where not complete")
    results = [r for run in runs for r in run.benchmarks]
    if any(r.complete is None or r.unscoreable for r in results):
        lines.append("(k/?): expected samples unknown; N unscored: rows without a score, left out of the value")
    lines.append(table([labels.header, *names, "GPU-HOURS", "WALL"], rows))
    for label, run in zip(labels.labels, runs):
        lines.append(f"  {label}: {run.record.gym_job_id} {run.record.run_dir}")
    return "\n".join(lines)
