"""``gym eval list`` and ``gym eval status``: what runs and sweeps there are and what their jobs
are doing."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from nemo_gym.orchestration.cli.common import add_json_flag, add_run_selector, selected, table
from nemo_gym.orchestration.display import echo

if TYPE_CHECKING:
    from rich.table import Table

    from nemo_gym.orchestration.library import JobStatus, RunStatus, Selection, SubmissionRecord, SweepRecord


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("list", help="runs and sweeps in the local index, newest last")
    add_json_flag(p, "the index's records")
    p.set_defaults(handler=run_list)

    p = verbs.add_parser("status", help="the state of every job of a run, or of every run of a sweep")
    add_run_selector(p)
    p.add_argument("--watch", action="store_true", help="refresh until every job has ended")
    p.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    add_json_flag(p, "each job's state")
    p.set_defaults(handler=run_status)


def run_list(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import list_runs, list_sweeps

    records = list_runs()
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in records], indent=2))
        return 0
    echo(
        table(
            ["RUN", "SUBMITTED", "STATE", "MODEL", "BACKEND", "HOST", "JOBS", "RUN DIR / WHAT DIFFERS"],
            list_rows(records, list_sweeps()),
        )
        if records
        else "no runs yet"
    )
    return 0


def list_rows(records: list[SubmissionRecord], sweeps: list[SweepRecord]) -> list[list[str]]:
    """One row per submission, oldest first: a run, or a sweep followed by its runs (indented,
    named by their swept values)."""
    by_sweep: dict[str, list[SubmissionRecord]] = {}
    for r in records:
        if r.sweep_id:
            by_sweep.setdefault(r.sweep_id, []).append(r)
    sweep_of = {s.sweep_id: s for s in sweeps}
    rows, shown = [], set()
    for r in records:
        if not r.sweep_id:
            rows.append(_run_row(r))
        elif r.sweep_id not in shown:  # where its first run stands
            shown.add(r.sweep_id)
            rows += _sweep_rows(r, by_sweep[r.sweep_id], sweep_of.get(r.sweep_id))
    return rows


def _last_seen(r: SubmissionRecord) -> str:
    from nemo_gym.orchestration.library import last_observed

    observed = last_observed(r.gym_job_id)
    return f"{observed[0]} (as of {observed[1]})" if observed else "not yet observed"


def _run_row(r: SubmissionRecord) -> list[str]:
    return [
        r.gym_job_id,
        r.submitted_at,
        _last_seen(r),
        r.model or "",
        r.executor,
        r.hostname or "local",
        str(len(r.benchmarks)),
        r.run_dir,
    ]


def _sweep_rows(first: SubmissionRecord, members: list[SubmissionRecord], sweep: SweepRecord | None) -> list[list[str]]:
    """The sweep's own row, then one per run (the sweep record may be missing: its runs still show)."""
    from nemo_gym.orchestration.library import short_keys, short_values_label

    if sweep is not None:  # in the sweep's order
        order = {run.run_id: i for i, run in enumerate(sweep.runs)}
        members.sort(key=lambda m: order.get(m.gym_job_id, len(order)))
    names = short_keys(list(sweep.swept) if sweep else list(members[0].sweep_values))
    swept = ", ".join(names.values())
    jobs = sum(len(m.benchmarks) for m in members)
    submitted = sweep.submitted_at if sweep else first.submitted_at
    where = first.hostname or "local"
    header = [
        first.sweep_id or "",
        submitted,
        "",
        "",
        first.executor,
        where,
        str(jobs),
        f"sweep of {len(members)} runs over {swept}",
    ]
    runs = [
        [
            f"  {m.gym_job_id}",
            "",
            _last_seen(m),
            m.model or "",
            "",
            "",
            str(len(m.benchmarks)),
            short_values_label(m.sweep_values, names),
        ]
        for m in members
    ]
    return [header, *runs]


HEADERS = ["BENCHMARK", "JOB", "STATE", "GPU-HOURS", "WALL", "DETAIL"]


def status_rows(jobs: list[JobStatus]) -> list[list[str]]:
    from nemo_gym.orchestration.library import hours_text, wall_text

    # A resumed benchmark shows its chain of jobs, oldest first: 101 -> 102 -> 103; a sharded one
    # its shards' jobs in one word (1200_[0-2]).
    return [
        [
            s.benchmark,
            " -> ".join(s.chain) if len(s.chain) > 1 and not s.shards else s.job_id or "-",
            s.state,
            hours_text(s.usage),
            wall_text(s.usage),
            s.detail,
        ]
        for s in jobs
    ]


def status_table(selection: Selection, runs: list[RunStatus]) -> tuple[str, list[str], list[list[str]], str]:
    """(title, headers, rows, total line) of one run, or of a sweep: a row per job of every run,
    led by the run's swept values."""
    from nemo_gym.orchestration.library import run_labels, total_usage
    from nemo_gym.orchestration.verbs.results.command import total_line

    first = selection.records[0]
    where = f"{first.executor}{' on ' + first.hostname if first.hostname else ''}"
    if selection.sweep is None:
        [run] = runs
        return (
            f"Run {first.gym_job_id} ({where})",
            HEADERS,
            status_rows(run.jobs),
            total_line(run.usage, first.executor),
        )
    labels = run_labels(selection.records)
    rows = [[label, *row] for label, run in zip(labels.labels, runs) for row in status_rows(run.jobs)]
    title = f"Sweep {selection.name} ({where}): {len(runs)} runs"
    return title, [labels.header, *HEADERS], rows, total_line(total_usage(run.usage for run in runs), first.executor)


def status_text(selection: Selection, runs: list[RunStatus]) -> str:
    title, headers, rows, total = status_table(selection, runs)
    lines = [title, table(headers, rows), total]
    if selection.sweep is not None:
        from nemo_gym.orchestration.library import run_labels

        lines += [
            f"  {label}: {r.gym_job_id} {r.run_dir}"
            for label, r in zip(run_labels(selection.records).labels, selection.records)
        ]
    return "\n".join(lines)


def status_json(selection: Selection, runs: list[RunStatus]) -> str:
    """One run's document, or a sweep's: ``{"sweep", "gpu_hours", "wall_seconds", "runs": [...]}``."""
    from nemo_gym.orchestration.library import status_json as run_json
    from nemo_gym.orchestration.library import total_usage

    docs = [run_json(run.record, run.jobs) for run in runs]
    if selection.sweep is None:
        return docs[0]
    usage = total_usage(run.usage for run in runs)
    return json.dumps(
        {
            "sweep": selection.name,
            "gpu_hours": None if usage.gpu_hours is None else round(usage.gpu_hours, 4),
            "wall_seconds": None if usage.wall_seconds is None else round(usage.wall_seconds, 1),
            "runs": [{**json.loads(doc), "values": run.record.sweep_values} for doc, run in zip(docs, runs)],
        },
        indent=2,
    )


def run_status(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import feed_store_of, status

    selection = selected(args)
    if not args.watch:
        runs = status(selection.records)
        echo(status_json(selection, runs) if args.json else status_text(selection, runs))
        feed_store_of(runs)  # after the output: a failing store is a warning, never the exit code
        return 0
    return _watch(selection, args.interval, args.json)


def _watch(selection: Selection, interval: float, as_json: bool) -> int:
    """Until every job has ended: live in a terminal; else (or with --json) once, at the end."""
    from nemo_gym.orchestration.library import feed_store_of, watch

    views = watch(selection.records, interval)
    if as_json or not sys.stdout.isatty():
        *_, runs = views
        echo(status_json(selection, runs) if as_json else status_text(selection, runs))
    else:
        from rich.console import Console
        from rich.live import Live

        runs = next(views)
        with Live(rich_table(selection, runs), console=Console(), auto_refresh=False) as live:
            for runs in views:
                live.update(rich_table(selection, runs), refresh=True)
    feed_store_of(runs)  # every job has ended: the run is final
    return 0 if all(run.succeeded for run in runs) else 1


def rich_table(selection: Selection, runs: list[RunStatus]) -> Table:
    """``status --watch``'s view: the status table for rich, every cell shown as written."""
    from rich.table import Table

    from nemo_gym.orchestration.display import rich as shown

    title, headers, rows, total = status_table(selection, runs)
    view = Table(title=shown(title), caption=shown(total), expand=False)
    for i, header in enumerate(headers):
        # A sweep's first column is named by its swept keys, which are spelled as written.
        view.add_column(shown(header if i == 0 and selection.sweep else header.lower()))
    for row in rows:
        view.add_row(*(shown(cell) for cell in row))
    return view
