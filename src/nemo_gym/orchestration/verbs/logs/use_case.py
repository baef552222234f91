"""A run's logs: the job's own, a service's (every node) or the driver's, of every run named;
followed as they are written, of one run."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.connection import Connect, Connection, connect
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library.hosts import over_their_hosts
from nemo_gym.orchestration.library.selecting import one_job
from nemo_gym.orchestration.observe import probe_runs
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord
from nemo_gym.orchestration.verbs.logs.script import log_patterns, logs_script


@dataclass(frozen=True)
class LogRequest:
    """Which log of a run: the job's own (default), a service's (every node) or the driver's."""

    benchmark: str | None = None
    service: str | None = None
    driver: bool = False
    lines: int | None = None  # the last N lines; all when None

    def what(self) -> str:
        return f"service {self.service!r}" if self.service else "the driver" if self.driver else "the job"


@dataclass(frozen=True)
class RunLog:
    """One run's wanted log, or why there is none yet."""

    record: SubmissionRecord
    text: str | None
    problem: str | None = None


def _logs_script(record: SubmissionRecord, request: LogRequest, follow: bool) -> tuple[BenchmarkJob, str]:
    job = one_job(record, request.benchmark)
    patterns = log_patterns(job, request.service, request.driver, record.shared_deployment_dir)
    return job, logs_script(job, patterns, request.lines, follow)


def _no_logs(job: BenchmarkJob, request: LogRequest) -> UserError:
    return UserError(
        f"no log of {request.what()} for {job.benchmark} yet (the job may still be queued, or the name is wrong)"
    )


def logs(records: list[SubmissionRecord], request: LogRequest, *, connect: Connect = connect) -> list[RunLog]:
    """The wanted log of each run (the last ``request.lines`` lines of each of its files), over one
    connection per host; a run without it says why. A wrong or missing benchmark name is wrong in
    every run: refused before anything is connected to. A job that was never queued is told from
    the record alone: its run's host is not connected to (an unreachable host cannot hide it), and
    when the others' host cannot be reached, every never-queued run's problem is told with that."""
    for record in records:
        one_job(record, request.benchmark)
    found: dict[int, RunLog] = {}
    asked: list[tuple[int, BenchmarkJob, str]] = []
    for i, record in enumerate(records):
        try:
            job, script = _logs_script(record, request, follow=False)
        except UserError as exc:  # this run's job was never queued
            found[i] = RunLog(record, None, "; ".join(exc.problems))
        else:
            asked.append((i, job, script))
    if asked:

        def batch(conn: Connection, indices: list[int]) -> list[RunLog]:
            return [_log_of(conn, records[asked[k][0]], *asked[k][1:], request) for k in indices]

        try:
            answers = over_their_hosts([records[i] for i, _, _ in asked], connect, batch)
        except UserError as exc:
            if not found:
                raise
            told = [f"run {found[i].record.gym_job_id}: {found[i].problem}" for i in sorted(found)]
            raise UserError([*told, *exc.problems]) from None
        found.update((i, log) for (i, _, _), log in zip(asked, answers))
    return [found[i] for i in range(len(records))]


def _log_of(conn: Connection, record: SubmissionRecord, job: BenchmarkJob, script: str, request: LogRequest) -> RunLog:
    result = conn.run_script(script)
    if contract.NO_LOGS_MARKER in result.stdout:
        return RunLog(record, None, "; ".join(_no_logs(job, request).problems))
    return RunLog(record, result.stdout)


def follow_logs(
    record: SubmissionRecord, request: LogRequest, *, connect: Connect = connect, poll_seconds: float = 2.0
) -> Iterator[str]:
    """The wanted log's lines of one run as they are written, until the job has ended (and its last lines arrived)."""
    job, script = _logs_script(record, request, follow=True)
    with connect(record.hostname) as conn:
        proc = conn.stream_script(script)
        done = threading.Event()

        def stop_when_the_job_ends() -> None:
            while not done.is_set():
                [statuses] = probe_runs([record], conn)
                [current] = [s for s in statuses if s.benchmark == job.benchmark]
                if current.state.final:
                    time.sleep(1.5)
                    proc.terminate()
                    return
                done.wait(poll_seconds)

        threading.Thread(target=stop_when_the_job_ends, daemon=True).start()
        assert proc.stdout is not None
        try:
            for line in proc.stdout:
                if line.strip() == contract.NO_LOGS_MARKER:
                    raise _no_logs(job, request)
                yield line
        finally:
            done.set()
            proc.terminate()
            proc.wait()
