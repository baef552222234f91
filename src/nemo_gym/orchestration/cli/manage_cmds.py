"""``gym eval logs | cancel``."""

from __future__ import annotations

import argparse
import sys
import threading
import time

from nemo_gym.orchestration.cli.observe_cmds import _run_selector
from nemo_gym.orchestration.errors import UserError


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser("logs", help="a job's log, a service's or the driver's")
    _run_selector(p)
    p.add_argument("benchmark", nargs="?", help="which benchmark's job (needed when the run has several)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--service", metavar="NAME", help="the logs of service NAME (every node)")
    which.add_argument("--driver", action="store_true", help="the driver's log")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the job ends")
    p.add_argument("-n", "--lines", type=int, metavar="N", help="only the last N lines")
    p.set_defaults(handler=run_logs)

    p = verbs.add_parser("cancel", help="cancel a run's jobs (all, or the benchmarks named)")
    p.add_argument("run", nargs="?", help="run id or a unique part of it")
    p.add_argument("benchmarks", nargs="*", help="only these benchmarks")
    p.add_argument("--last", action="store_true", help="the most recent run")
    p.set_defaults(handler=run_cancel)


def _shift_for_last(args: argparse.Namespace, names: list[str]) -> list[str]:
    """With --last there is no RUN argument: the first positional is a benchmark."""
    if args.last and args.run is not None:
        return [args.run, *names]
    return names


def run_logs(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.connection import connect
    from nemo_gym.orchestration.manage import log_patterns, logs_script, one_job
    from nemo_gym.orchestration.observe import find_run

    if args.last and args.run is not None and args.benchmark is None:
        args.benchmark, args.run = args.run, None
    record = find_run(args.run, args.last)
    job = one_job(record, args.benchmark)
    script = logs_script(job, log_patterns(job, args.service, args.driver, record.run_dir), args.lines, args.follow)
    with connect(record.hostname) as conn:
        if not args.follow:
            result = conn.run_script(script)
            if "__GYM_NO_LOGS__" in result.stdout:
                raise UserError(_no_logs(job.benchmark, args))
            sys.stdout.write(result.stdout)
            return 0
        return _follow(record, job, conn, script, args)


def _no_logs(benchmark: str, args: argparse.Namespace) -> str:
    what = f"service {args.service!r}" if args.service else "the driver" if args.driver else "the job"
    return f"no log of {what} for {benchmark} yet (the job may still be queued, or the name is wrong)"


def _follow(record, job, conn, script: str, args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.observe import FINAL, probe_run

    proc = conn.stream_script(script)
    done = threading.Event()

    def watch() -> None:
        # Stop following once the job has ended and its last lines had time to arrive.
        while not done.is_set():
            [status] = [s for s in probe_run(record, conn) if s.benchmark == job.benchmark]
            if status.state in FINAL:
                time.sleep(1.5)
                proc.terminate()
                return
            done.wait(2)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            if line.strip() == "__GYM_NO_LOGS__":
                raise UserError(_no_logs(job.benchmark, args))
            sys.stdout.write(line)
            sys.stdout.flush()
    finally:
        done.set()
        proc.terminate()
        proc.wait()
    return 0


def run_cancel(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.connection import connect
    from nemo_gym.orchestration.manage import cancel_script, cancellable, select_jobs
    from nemo_gym.orchestration.observe import find_run, probe_run

    names = _shift_for_last(args, args.benchmarks)
    record = find_run(None if args.last else args.run, args.last)
    jobs = select_jobs(record, names)
    with connect(record.hostname) as conn:
        statuses = probe_run(record, conn)
        live, done = cancellable(statuses, jobs)
        for status in done:
            print(f"  {status.benchmark}: already {status.state}, nothing to cancel")
        if not live:
            return 0
        result = conn.run_script(cancel_script(record, live))
    failed = {line.split(":", 1)[1] for line in result.stdout.splitlines() if line.startswith("__GYM_CANCEL_FAILED:")}
    for job in live:
        if job.benchmark in failed:
            print(f"  {job.benchmark}: scancel {job.job_id} failed", file=sys.stderr)
        else:
            chain = next(s.chain for s in statuses if s.benchmark == job.benchmark)
            print(f"  cancelled {job.benchmark} (job {' -> '.join(chain) or job.job_id})")
    return 1 if failed else 0
