"""``gym eval cancel``: cancel a run's jobs (or every run's of a sweep) still queued or running."""

from __future__ import annotations

import argparse

from nemo_gym.orchestration.cli.common import RUN_HELP, add_run_selector, after_run, run_prefix, selected
from nemo_gym.orchestration.display import echo


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("cancel", help="cancel a run's or a sweep's jobs (all, or the benchmarks named)")
    add_run_selector(p, run_help=RUN_HELP.replace(", or a run's directory", ""))
    p.add_argument("benchmarks", nargs="*", help="only these benchmarks (of every run of a sweep)")
    p.set_defaults(handler=run_cancel)


def run_cancel(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.errors import UserError
    from nemo_gym.orchestration.library import cancel, cancel_command, looks_like_a_directory

    if args.run is not None and not args.last and looks_like_a_directory(args.run):
        # A copied run's job ids may name other jobs by now: only a run of your index is cancelled.
        raise UserError(f"gym eval cancel takes a run id from your index (gym eval list), not a directory ({args.run})")
    selection = selected(args)
    reports = cancel(selection.records, after_run(args, args.benchmarks))
    ok = True
    for where, record, report in zip(run_prefix(selection), selection.records, reports):
        for job in report.already_ended:
            echo(f"  {where}{job.benchmark}: already {job.state}, nothing to cancel")
        for job in report.refused:
            echo(f"  {where}{job.benchmark}: {cancel_command(record)} {job.job_id} failed", err=True)
        for job in report.cancelled:
            jobs = " -> ".join(job.chain) or job.job_id
            if report.job_left_running:
                # A shared job that serves other runs: it goes on, without this one.
                echo(
                    f"  {where}cancelled {job.benchmark} (shared job {job.job_id} skips it and goes on for the others)"
                )
                continue
            echo(f"  {where}cancelled {job.benchmark} " + (f"(job {jobs})" if jobs else "(before its lane queued it)"))
        ok = ok and report.ok
    return 0 if ok else 1
