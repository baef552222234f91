"""``gym eval logs``: a job's log, a service's (every node) or the driver's; ``-f`` follows. Of a
sweep: the same log of every run, each under a header naming the run."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from nemo_gym.orchestration.cli.common import add_run_selector, after_run, selected
from nemo_gym.orchestration.display import echo, terminal

if TYPE_CHECKING:
    from nemo_gym.orchestration.library import LogRequest, Selection


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
    from nemo_gym.orchestration.library import LogRequest

    benchmarks = after_run(args, [args.benchmark] if args.benchmark is not None else [])
    selection = selected(args)
    request = LogRequest(benchmarks[-1] if benchmarks else None, args.service, args.driver, args.lines)
    if args.follow:
        return follow(selection, request)
    return print_logs(selection, request)


def follow(selection: Selection, request: LogRequest) -> int:
    from nemo_gym.orchestration.errors import UserError
    from nemo_gym.orchestration.library import follow_logs

    if selection.sweep is not None:
        raise UserError(
            f"-f follows one run's log; name one run of sweep {selection.name} (gym eval status {selection.name} lists them)"
        )
    [record] = selection.records
    for line in follow_logs(record, request):
        sys.stdout.write(line)
        sys.stdout.flush()
    return 0


def print_logs(selection: Selection, request: LogRequest) -> int:
    """One run's log as it is (or why there is none, as an error); a sweep's, each under its run's header."""
    from nemo_gym.orchestration.errors import UserError
    from nemo_gym.orchestration.library import logs, run_labels

    found = logs(selection.records, request)
    if selection.sweep is None:
        [log] = found
        if log.text is None:
            raise UserError(log.problem or "")
        sys.stdout.write(log.text)
        return 0
    for label, log in zip(run_labels(selection.records).labels, found):
        echo(f"==> {terminal(label)} ({terminal(log.record.gym_job_id)}) <==")
        sys.stdout.write(log.text if log.text is not None else f"({log.problem})\n")
    return 0 if any(log.text is not None for log in found) else 1
