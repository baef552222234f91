"""``gym eval cancel``: cancel a run's jobs (or every run's of a sweep) still queued or running."""

from __future__ import annotations

import argparse

from nemo_gym.orchestration.cli.common import RUN_HELP
from nemo_gym.orchestration.display import echo


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("cancel", help="cancel a run's or a sweep's jobs (all, or the benchmarks named)")
    p.add_argument("run", nargs="?", help=RUN_HELP.replace(", or a run's directory", ""))
    p.add_argument("benchmarks", nargs="*", help="only these benchmarks (of every run of a sweep)")
    p.add_argument("--last", action="store_true", help="your most recent submission: this shell session's, else yours on this machine (a sweep when it was one)")
    p.set_defaults(handler=run_cancel)


def run_cancel(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.cli.common import run_and_benchmarks
    from nemo_gym.orchestration.errors import UserError
    from nemo_gym.orchestration.library import cancel_runs
    from nemo_gym.orchestration.record import find_selection, looks_like_a_directory
    from nemo_gym.orchestration.sweep import run_labels

    run, names = run_and_benchmarks(args, args.benchmarks)
    if run is not None and looks_like_a_directory(run):
        # A copied run's job ids may name other jobs by now: only a run of your index is cancelled.
        raise UserError(f"gym eval cancel takes a run id from your index (gym eval list), not a directory ({run})")
    selection = find_selection(run, args.last)
    reports = cancel_runs(selection.records, names)
    labels = run_labels(selection.records).labels
    ok = True
    for label, report in zip(labels, reports):
        # A sweep's lines say which run; one run's stay as they always were.
        where = f"{label}: " if selection.sweep else ""
        for job in report.already_ended:
            echo(f"  {where}{job.benchmark}: already {job.state}, nothing to cancel")
        for job in report.refused:
            echo(f"  {where}{job.benchmark}: scancel {job.job_id} failed", err=True)
        for job in report.cancelled:
            echo(f"  {where}cancelled {job.benchmark} (job {' -> '.join(job.chain) or job.job_id})")
        ok = ok and report.ok
    return 0 if ok else 1
