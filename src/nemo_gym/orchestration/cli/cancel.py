"""``gym eval cancel``: cancel a run's jobs still queued or running."""

from __future__ import annotations

import argparse
import sys


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("cancel", help="cancel a run's jobs (all, or the benchmarks named)")
    p.add_argument("run", nargs="?", help="run id or a unique part of it")
    p.add_argument("benchmarks", nargs="*", help="only these benchmarks")
    p.add_argument("--last", action="store_true", help="the most recent run")
    p.set_defaults(handler=run_cancel)


def run_cancel(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.cli.common import run_and_benchmarks
    from nemo_gym.orchestration.errors import UserError
    from nemo_gym.orchestration.library import cancel
    from nemo_gym.orchestration.record import find_run, looks_like_a_directory

    run, names = run_and_benchmarks(args, args.benchmarks)
    if run is not None and looks_like_a_directory(run):
        # A copied run's job ids may name other jobs by now: only a run of your index is cancelled.
        raise UserError(f"gym eval cancel takes a run id from your index (gym eval list), not a directory ({run})")
    report = cancel(find_run(run, args.last), names)
    for job in report.already_ended:
        print(f"  {job.benchmark}: already {job.state}, nothing to cancel")
    for job in report.refused:
        print(f"  {job.benchmark}: scancel {job.job_id} failed", file=sys.stderr)
    for job in report.cancelled:
        print(f"  cancelled {job.benchmark} (job {' -> '.join(job.chain) or job.job_id})")
    return 0 if report.ok else 1
