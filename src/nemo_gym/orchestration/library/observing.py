"""Observing runs: what their jobs are doing (once, or until they end), their results, two
compared, an HTML report; and what the local index holds."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nemo_gym.orchestration.connection import Connect, Connection, connect
from nemo_gym.orchestration.contract import Status
from nemo_gym.orchestration.estimate import Spent
from nemo_gym.orchestration.library.hosts import over_their_hosts
from nemo_gym.orchestration.observe import MISSING_NAMED, JobStatus, SampleCheck, probe_runs, run_usage, was_queued
from nemo_gym.orchestration.observe.lanes import with_lane_turns
from nemo_gym.orchestration.record import (
    SubmissionRecord,
    SweepRecord,
    all_records,
    all_sweeps,
    indexed_run,
    write_observation,
)
from nemo_gym.orchestration.results import DEFAULT_METRIC, RunResults, collect_results, require_metric
from nemo_gym.orchestration.usage import Usage

if TYPE_CHECKING:
    from nemo_gym.orchestration.comparison import RunComparison
    from nemo_gym.orchestration.stats import Correction


def list_runs() -> list[SubmissionRecord]:
    """Every run in the local index, oldest first."""
    return all_records()


def list_sweeps() -> list[SweepRecord]:
    """Every sweep in the local index, oldest first."""
    return all_sweeps()


@dataclass(frozen=True)
class RunStatus:
    record: SubmissionRecord
    jobs: list[JobStatus]

    @property
    def final(self) -> bool:
        return all(job.state.final for job in self.jobs)

    @property
    def succeeded(self) -> bool:
        return all(job.state == Status.SUCCEEDED for job in self.jobs)

    @property
    def usage(self) -> Usage:
        """The run's total: every job once."""
        return run_usage(self.jobs)

    @property
    def summary(self) -> str:
        """Its jobs' states in a few words: ``succeeded``, or ``2 running, 1 queued``."""
        counts = Counter(job.state for job in self.jobs)
        if len(counts) > 1:
            return ", ".join(f"{n} {state}" for state, n in counts.most_common())
        return str(next(iter(counts), ""))


def status(
    records: list[SubmissionRecord],
    conn: Connection | None = None,
    *,
    connect: Connect = connect,
    previous: list[RunStatus] | None = None,
    missing_named: int = MISSING_NAMED,
) -> list[RunStatus]:
    """Every job's state of every run, in order, over ``conn`` (kept open by the caller) or one
    connection per host: one round trip per host, however many runs; none for runs nobody could
    queue (no cluster needs to be asked). ``previous``: the statuses a moment ago, whose final sample
    counts are kept, not made again (they cannot change once a job has ended). ``missing_named``: how
    many missing samples each benchmark's count names. A lane's jobs are told their turn, the runs
    whose jobs feed theirs (a sweep's lanes run across its runs) asked along from the index."""
    asked = len(records)
    records = records + feeder_runs(records)
    known = [_known_checks(run) for run in previous] if previous else []
    known += [{} for _ in records[len(known) :]]

    def batch(opened: Connection | None, indices: list[int]) -> list[RunStatus]:
        statuses = probe_runs([records[i] for i in indices], opened, [known[i] for i in indices], missing_named)
        return [RunStatus(records[i], s) for i, s in zip(indices, statuses)]

    if conn is None and not any(was_queued(record) for record in records):
        runs = batch(None, list(range(len(records))))
    else:
        runs = over_their_hosts(records, connect, batch, conn)
    told = with_lane_turns([(run.record, run.jobs) for run in runs])
    return [_observed(RunStatus(run.record, jobs)) for run, jobs in zip(runs[:asked], told)]


# However far back a lane is followed into other runs of its sweep.
FEEDER_RUNS_READ = 2000


def feeder_runs(records: list[SubmissionRecord]) -> list[SubmissionRecord]:
    """The runs, not among ``records``, whose jobs queue theirs in their lanes (and theirs, and so
    on), as the local index records them; those it does not hold are left out (their jobs' turns
    then read as waiting)."""
    have = {record.gym_job_id for record in records}
    found: list[SubmissionRecord] = []
    wanted = _feeding_runs(records) - have
    while wanted and len(found) < FEEDER_RUNS_READ:
        run_id = min(wanted)
        wanted.discard(run_id)
        have.add(run_id)
        record = indexed_run(run_id)
        if record is not None:
            found.append(record)
            wanted |= _feeding_runs([record]) - have
    return found


def _feeding_runs(records: list[SubmissionRecord]) -> set[str]:
    return {unit.fed_by.split("/", 1)[0] for record in records for unit in record.units if unit.fed_by}


def watch(records: list[SubmissionRecord], interval: float, *, connect: Connect = connect) -> Iterator[list[RunStatus]]:
    """The runs' statuses every ``interval`` seconds over one connection (a sweep's runs share
    their host), until every job has ended: the last one yielded is final."""
    with connect(records[0].hostname) as conn:
        runs = status(records, conn)
        yield runs
        while not all(run.final for run in runs):
            time.sleep(interval)
            runs = status(records, conn, previous=runs)
            yield runs


def _observed(run: RunStatus) -> RunStatus:
    """``run``, remembered in the index as last observed (``gym eval list`` shows it), with what
    its successful jobs cost (the estimates of later submissions read it)."""
    write_observation(run.record.gym_job_id, run.summary, spent_of(run))
    return run


def spent_of(run: RunStatus) -> list[Spent]:
    """What each benchmark that succeeded cost, on the GPUs its allocation held."""
    return [
        Spent(job.benchmark, job.usage.gpus, job.usage.gpu_hours, job.usage.wall_seconds)
        for job in run.jobs
        if job.state == Status.SUCCEEDED and job.usage.gpu_hours is not None and job.usage.gpus is not None
    ]


def _known_checks(previous: RunStatus) -> dict[str, SampleCheck]:
    return {j.benchmark: j.check for j in previous.jobs if j.check is not None and j.state.final}


def results(
    records: list[SubmissionRecord],
    metric: str | None = None,
    *,
    group_key: str | None = None,
    connect: Connect = connect,
) -> list[RunResults]:
    """Each run's results, in order, over one connection per host (a sweep's runs share one): every
    run's states in one round trip, then every run's files in one more: each benchmark's metrics, samples against
    the expected ones, its ``metric`` (default: reward) per task, and what its jobs cost. A metric
    named, or shown side by side for several runs, must be one the runs have."""
    found = read_results(records, metric, group_key=group_key, connect=connect)
    if metric or len(found) > 1:
        require_metric(found, metric or DEFAULT_METRIC)
    return found


def read_results(
    records: list[SubmissionRecord],
    metric: str | None = None,
    *,
    group_key: str | None = None,
    connect: Connect = connect,
) -> list[RunResults]:
    """``results`` without asking that the metric be one the runs have (the results store takes
    each run as it is)."""

    def batch(conn: Connection, indices: list[int]) -> list[RunResults]:
        runs = [records[i] for i in indices]
        statuses = probe_runs(runs, conn)
        found = collect_results(runs, statuses, conn, metric or DEFAULT_METRIC, group_key)
        return [RunResults(r, s, f) for r, s, f in zip(runs, statuses, found)]

    return over_their_hosts(records, connect, batch)


def compare(
    base: SubmissionRecord,
    candidate: SubmissionRecord,
    metric: str | None = None,
    *,
    allow_different_inputs: bool = False,
    correction: Correction | None = None,
    group_key: str | None = None,
    connect: Connect = connect,
) -> RunComparison:
    """BASE against CANDIDATE, per benchmark, on the tasks both runs have, the benchmarks judged as
    one family (``correction``, Holm's by default). A benchmark whose runs were asked different
    tasks is flagged, and cannot decide a gate unless ``allow_different_inputs``."""
    from nemo_gym.orchestration.comparison import compare_runs
    from nemo_gym.orchestration.stats import Correction

    runs = results([base, candidate], metric, group_key=group_key, connect=connect)
    return compare_runs(
        runs[0],
        runs[1],
        metric or DEFAULT_METRIC,
        allow_different_inputs=allow_different_inputs,
        correction=correction or Correction.HOLM,
    )


def report(records: list[SubmissionRecord], metric: str | None = None, *, connect: Connect = connect) -> str:
    """The HTML report of several runs (a sweep's): the results ``results`` shows and, of exactly
    two runs, the comparison ``compare`` shows, as one self-contained page."""
    from nemo_gym.orchestration.comparison import compare_runs
    from nemo_gym.orchestration.verbs.report.page import report_html, require_matplotlib

    require_matplotlib()  # before any connection: say what to install first
    runs = results(records, metric, connect=connect)
    require_metric(runs, metric or DEFAULT_METRIC)  # of one run too: the page charts it
    comparison = compare_runs(runs[0], runs[1], metric or DEFAULT_METRIC) if len(runs) == 2 else None
    return report_html(runs, metric or DEFAULT_METRIC, comparison, sweep_size=sweep_size(records))


def sweep_size(records: list[SubmissionRecord]) -> int | None:
    """How many runs the sweep of ``records`` has, by its index entry, when they are one sweep's."""
    sweeps = {r.sweep_id for r in records}
    if len(sweeps) != 1 or None in sweeps:
        return None
    return next((len(s.runs) for s in all_sweeps() if s.sweep_id in sweeps), None)
