"""``gym eval logs``: a job's log, a service's (every node) or the driver's; ``-f`` follows. Of a
sweep: the same log of every run, each under a header naming the run."""

from __future__ import annotations

import argparse
import sys

from nemo_gym.orchestration.cli.common import add_run_selector
from nemo_gym.orchestration.display import echo, terminal


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("logs", help="a job's log, a service's or the driver's (of every run of a sweep)")
    add_run_selector(p)
    p.add_argument("benchmark", nargs="?", help="which benchmark's job (needed when the run has several)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--service", metavar="NAME", help="the logs of service NAME (every node)")
    which.add_argument("--driver", action="store_true", help="the driver's log")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends (one run)")
    p.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines")
    p.set_defaults(handler=run_logs)


def run_logs(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import LogRequest, follow_logs, logs
    from nemo_gym.orchestration.record import find_selection

    run, benchmark = args.run, args.benchmark
    if args.last and run is not None and benchmark is None:
        run, benchmark = None, run
    selection = find_selection(run, args.last)
    request = LogRequest(benchmark, args.service, args.driver, args.lines)
    if selection.sweep is not None:
        return sweep_logs(selection, request, args.follow)
    [record] = selection.records
    if not args.follow:
        sys.stdout.write(logs(record, request))
        return 0
    for line in follow_logs(record, request):
        sys.stdout.write(line)
        sys.stdout.flush()
    return 0


def sweep_logs(selection, request, follow: bool) -> int:
    from nemo_gym.orchestration.errors import UserError
    from nemo_gym.orchestration.library import logs_of_runs
    from nemo_gym.orchestration.sweep import run_labels

    if follow:
        raise UserError(
            f"-f follows one run's log; name one run of sweep {selection.name} (gym eval status {selection.name} lists them)"
        )
    found = logs_of_runs(selection.records, request)
    for label, log in zip(run_labels(selection.records).labels, found):
        echo(f"==> {terminal(label)} ({terminal(log.record.gym_job_id)}) <==")
        sys.stdout.write(log.text if log.text is not None else f"({log.problem})\n")
    return 0 if any(log.text is not None for log in found) else 1
