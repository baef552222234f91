"""``gym eval list`` and ``gym eval status``: what runs there are and what their jobs are doing."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from nemo_gym.orchestration.cli.common import add_run_selector, table

if TYPE_CHECKING:
    from nemo_gym.orchestration.library import RunStatus
    from nemo_gym.orchestration.observe import JobStatus


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("list", help="runs in the local index, newest last")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=run_list)

    p = verbs.add_parser("status", help="the state of every job of a run")
    add_run_selector(p)
    p.add_argument("--watch", action="store_true", help="refresh until every job has ended")
    p.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=run_status)


def run_list(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import list_runs

    records = list_runs()
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in records], indent=2))
        return 0
    rows = [
        [r.gym_job_id, r.submitted_at, r.executor, r.hostname or "local", str(len(r.benchmarks)), r.run_dir]
        for r in records
    ]
    print(table(["RUN", "SUBMITTED", "BACKEND", "HOST", "JOBS", "RUN DIR"], rows) if rows else "no runs yet")
    return 0


HEADERS = ["BENCHMARK", "JOB", "STATE", "GPU-HOURS", "WALL", "DETAIL"]


def status_rows(jobs: list[JobStatus]) -> list[list[str]]:
    from nemo_gym.orchestration.usage import hours_text, wall_text

    # A resumed benchmark shows its chain of jobs, oldest first: 101 -> 102 -> 103.
    return [[s.benchmark, " -> ".join(s.chain) if len(s.chain) > 1 else s.job_id or "-", s.state,
             hours_text(s.usage), wall_text(s.usage), s.detail] for s in jobs]  # fmt: skip


def status_text(run: RunStatus) -> str:
    from nemo_gym.orchestration.cli.results import total_line

    record = run.record
    head = f"Run {record.gym_job_id} ({record.executor}{' on ' + record.hostname if record.hostname else ''})"
    return head + "\n" + table(HEADERS, status_rows(run.jobs)) + "\n" + total_line(run.usage)


def status_json(run: RunStatus) -> str:
    from nemo_gym.orchestration.observe import statuses_json

    return statuses_json(run.record, run.jobs)


def run_status(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import status
    from nemo_gym.orchestration.record import find_run

    record = find_run(args.run, args.last)
    if not args.watch:
        run = status(record)
        print(status_json(run) if args.json else status_text(run))
        return 0
    return _watch(record, args.interval, args.json)


def _watch(record, interval: float, as_json: bool) -> int:
    from nemo_gym.orchestration.connection import connect
    from nemo_gym.orchestration.library import status

    with connect(record.hostname) as conn:
        if as_json or not sys.stdout.isatty():
            run = None
            while True:
                run = status(record, conn, previous=run)
                if run.final:
                    print(status_json(run) if as_json else status_text(run))
                    return 0 if run.succeeded else 1
                time.sleep(interval)
        from rich.console import Console
        from rich.live import Live
        from rich.table import Table

        from nemo_gym.orchestration.cli.results import total_line

        def render(run: RunStatus) -> Table:
            view = Table(title=f"Run {record.gym_job_id}", caption=total_line(run.usage), expand=False)
            for header in HEADERS:
                view.add_column(header.lower())
            for row in status_rows(run.jobs):
                view.add_row(*row)
            return view

        run = status(record, conn)
        with Live(render(run), console=Console(), auto_refresh=False) as live:
            while not run.final:
                time.sleep(interval)
                run = status(record, conn, previous=run)
                live.update(render(run), refresh=True)
        return 0 if run.succeeded else 1
