"""``gym eval list | status | results``: what runs there are and what their jobs are doing."""

from __future__ import annotations

import argparse
import sys
import time

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from nemo_gym.orchestration.observe import JobStatus
    from nemo_gym.orchestration.record import SubmissionRecord


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("list", help="runs in the local index, newest last")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=run_list)

    p = verbs.add_parser("status", help="the state of every job of a run")
    _run_selector(p)
    p.add_argument("--watch", action="store_true", help="refresh until every job has ended")
    p.add_argument("--interval", type=float, default=2.0, help=argparse.SUPPRESS)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=run_status)

    p = verbs.add_parser("results", help="every benchmark's aggregate metrics of a run")
    _run_selector(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=run_results)


def _run_selector(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", nargs="?", help="run id or a unique part of it (default: the last run)")
    p.add_argument("--last", action="store_true", help="the most recent run")


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines)


def run_list(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.observe import all_records

    records = all_records()
    if args.json:
        import json

        print(json.dumps([r.model_dump(mode="json") for r in records], indent=2))
        return 0
    rows = [
        [r.gym_job_id, r.submitted_at, r.executor, r.hostname or "local", str(len(r.benchmarks)), r.run_dir]
        for r in records
    ]
    print(_table(["RUN", "SUBMITTED", "EXECUTOR", "HOST", "JOBS", "RUN DIR"], rows) if rows else "no runs yet")
    return 0


def _status_rows(statuses: list[JobStatus]) -> list[list[str]]:
    # A resumed benchmark shows its chain of jobs, oldest first: 101 -> 102 -> 103.
    return [[s.benchmark, " -> ".join(s.chain) if len(s.chain) > 1 else s.job_id or "-", s.state, s.detail]
            for s in statuses]  # fmt: skip


def _status_text(record: SubmissionRecord, statuses: list[JobStatus]) -> str:
    head = f"Run {record.gym_job_id} ({record.executor}{' on ' + record.hostname if record.hostname else ''})"
    return head + "\n" + _table(["BENCHMARK", "JOB", "STATE", "DETAIL"], _status_rows(statuses))


def _exit_code(statuses: list[JobStatus]) -> int:
    return 0 if all(s.state == "succeeded" for s in statuses) else 1


def run_status(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.observe import find_run, probe_run, statuses_json

    record = find_run(args.run, args.last)
    if not args.watch:
        statuses = probe_run(record)
        print(statuses_json(record, statuses) if args.json else _status_text(record, statuses))
        return 0
    return _watch(record, args.interval, args.json)


def _watch(record: SubmissionRecord, interval: float, as_json: bool) -> int:
    from nemo_gym.orchestration.connection import connect
    from nemo_gym.orchestration.observe import all_final, probe_run, statuses_json

    with connect(record.hostname) as conn:
        if as_json or not sys.stdout.isatty():
            while True:
                statuses = probe_run(record, conn)
                if all_final(statuses):
                    print(statuses_json(record, statuses) if as_json else _status_text(record, statuses))
                    return _exit_code(statuses)
                time.sleep(interval)
        from rich.console import Console
        from rich.live import Live
        from rich.table import Table

        def render(statuses: list[JobStatus]) -> Table:
            table = Table(title=f"Run {record.gym_job_id}", expand=False)
            for header in ("benchmark", "job", "state", "detail"):
                table.add_column(header)
            for row in _status_rows(statuses):
                table.add_row(*row)
            return table

        statuses = probe_run(record, conn)
        with Live(render(statuses), console=Console(), auto_refresh=False) as live:
            while not all_final(statuses):
                time.sleep(interval)
                statuses = probe_run(record, conn)
                live.update(render(statuses), refresh=True)
        return _exit_code(statuses)


def run_results(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.observe import find_run, probe_run
    from nemo_gym.orchestration.results import collect_results, headline, results_json

    from nemo_gym.orchestration.connection import connect

    record = find_run(args.run, args.last)
    with connect(record.hostname) as conn:  # one connection for the states and the metrics
        states = {s.benchmark: s.state for s in probe_run(record, conn)}
        results = collect_results(record, states, conn)
    if args.json:
        print(results_json(record, results))
        return 0
    rows = []
    for r in results:
        metrics = ", ".join(f"{k}={v:.4g}" for k, v in headline(r.metrics)) if not r.missing else r.missing
        rows.append([r.benchmark, states.get(r.benchmark, "?"), str(r.samples), metrics])
    print(f"Run {record.gym_job_id}: {record.run_dir}")
    print(_table(["BENCHMARK", "STATE", "SAMPLES", "METRICS"], rows))
    for r in results:
        for path in r.files:
            print(f"  {r.benchmark}: {path}")
    return 0 if all(not r.missing for r in results) else 1
