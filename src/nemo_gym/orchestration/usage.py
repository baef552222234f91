"""What a benchmark's jobs cost: wall time and allocated GPU-hours. No I/O here.

Two sources, the better first, decided per job:

- the scheduler's accounting (its backend template's ``probe_accounting``: elapsed seconds and the GPUs
  in the allocation, Slurm's TRES),
  where the cluster keeps accounts; every run of a requeued job is a row, and they add up;
- otherwise the job's own record: ``job-start`` to ``job-end`` in ``.gym/<id>/events`` (and in
  ``.gym/<id>.attempt-N/events`` for earlier runs of a requeued job), times the GPUs the plan gave
  the job (``BenchmarkJob.gpus`` in the record). A job still running counts up to the probe's
  clock; a job that ended without writing ``job-end`` (killed with the node) counts up to the
  last sign of life it left (the newest of its last event, its state and heartbeat files and its
  log). ``facts.wall_seconds`` is that rule, and the exporters count by it too.

A resumable benchmark sums its chain's jobs. Benchmarks that share one job (``job.deployment:
shared``) each show that job's whole cost, and a run's total counts every job once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nemo_gym.orchestration import contract, facts

SOURCE_ACCOUNTING = "accounting"
SOURCE_JOB_RECORD = "job record"
SOURCE_NONE = "none"


@dataclass(frozen=True)
class AccountingRow:
    """One row of the scheduler's accounts: one run of a job, or of one component of a heterogeneous job."""

    job_id: str
    elapsed_seconds: int
    gpus: int
    component: int = 0  # of a heterogeneous job (``JobID`` 100+1): components run at the same time


@dataclass(frozen=True)
class OwnRecord:
    """What one run of a job wrote of its times (one ``.gym/<dir>/events``), and its last sign of life."""

    job_id: str
    start: float | None
    end: float | None
    last_seen: float | None  # newest of its last event and its files' mtimes; None when unknown
    current: bool  # the job's own directory, not an earlier run's of a requeued job (``.attempt-N``)

    @property
    def times(self) -> facts.RunTimes:
        return facts.RunTimes(self.start, self.end, self.last_seen)


@dataclass(frozen=True)
class Usage:
    wall_seconds: float | None  # None: nothing is known of the jobs' times
    gpu_hours: float | None
    gpus: int | None  # the GPUs of the (latest) allocation; None when unknown
    source: str  # SOURCE_ACCOUNTING, SOURCE_JOB_RECORD, both joined by "+", or SOURCE_NONE
    approximate: bool = False  # some job ended without its end record: counted to its last sign of life


NO_USAGE = Usage(None, None, None, SOURCE_NONE)


def gpus_in_tres(tres: str) -> int:
    """GPUs of a TRES string: ``cpu=8,gres/gpu=4,mem=64G`` -> 4. Typed counts (``gres/gpu:a100=4``)
    are summed when the untyped total is absent."""
    total: int | None = None
    typed = 0
    for item in tres.split(","):
        key, _, value = item.strip().partition("=")
        if not contract.is_count(value):
            continue
        if key == "gres/gpu":
            total = int(value)
        elif key.startswith("gres/gpu:"):
            typed += int(value)
    return total if total is not None else typed


def _is_job_or_task(job_id: str) -> bool:
    """``100``, or a job array's task ``100_5``."""
    job, underscore, task = job_id.partition("_")
    return contract.is_count(job) and (not underscore or contract.is_count(task))


def parse_accounting_row(cols: list[str]) -> AccountingRow | None:
    """``JobID|ElapsedRaw|AllocTRES`` split (JobID ``100`` or ``100+1``, a heterogeneous job's
    component); None for a row that is not one of our jobs' runs (a step, an error)."""
    if len(cols) < 3:
        return None
    job_id, plus, component = cols[0].strip().partition("+")
    if not _is_job_or_task(job_id) or (plus and not contract.is_count(component)):
        return None
    elapsed = cols[1].strip()
    return AccountingRow(job_id, contract.read_count(elapsed), gpus_in_tres(cols[2]), int(component or 0))


def own_record(
    state_dir_name: str, start: str, end: str, last_event: str, mtimes: Iterable[float], requeued_run_suffix: str
) -> OwnRecord:
    """One state directory's record: its name is ``<job id>`` or ``<job id><requeued_run_suffix><n>``."""
    job_id, sep, _ = state_dir_name.partition(requeued_run_suffix)
    times = facts.run_times(_float(start), _float(end), _float(last_event), mtimes)
    return OwnRecord(job_id, times.start, times.end, times.last_seen, current=not sep)


def job_usage(
    job_id: str,
    accounting: Mapping[str, list[AccountingRow]],
    own: Mapping[str, list[OwnRecord]],
    planned_gpus: int | None,
    now: float | None,
    running: bool,
) -> Usage:
    """One job's usage: from accounting when the scheduler has rows for it, else its own record."""
    rows = accounting.get(job_id)
    if rows:
        # Runs of a requeued job follow each other (their times add up); the components of a
        # heterogeneous job run together (the job's wall time is the longest's; their GPUs add up).
        components: dict[int, list[AccountingRow]] = {}
        for row in rows:
            components.setdefault(row.component, []).append(row)
        wall = float(max(sum(r.elapsed_seconds for r in runs) for runs in components.values()))
        gpu_seconds = sum(r.elapsed_seconds * r.gpus for r in rows)
        gpus = sum(runs[-1].gpus for runs in components.values())
        return Usage(wall, gpu_seconds / 3600, gpus, SOURCE_ACCOUNTING)
    records = [r for r in own.get(job_id, []) if r.start is not None]
    if not records:
        return NO_USAGE
    wall = 0.0
    approximate = False
    for record in records:
        seconds, guessed = facts.wall_seconds(record.times, now, running and record.current)
        wall += seconds
        approximate = approximate or guessed
    gpu_hours = wall * planned_gpus / 3600 if planned_gpus is not None else None
    return Usage(wall, gpu_hours, planned_gpus, SOURCE_JOB_RECORD, approximate)


def total(usages: Iterable[Usage]) -> Usage:
    """The sum of several jobs' (or benchmarks') usage; unknown parts add nothing but are marked."""
    usages = [u for u in usages if u.source != SOURCE_NONE]
    if not usages:
        return NO_USAGE
    walls = [u.wall_seconds for u in usages if u.wall_seconds is not None]
    hours = [u.gpu_hours for u in usages]
    sources = sorted({s for u in usages for s in u.source.split("+")})
    return Usage(
        wall_seconds=sum(walls) if walls else None,
        gpu_hours=sum(h for h in hours if h is not None) if any(h is not None for h in hours) else None,
        gpus=usages[-1].gpus,
        source="+".join(sources),
        approximate=any(u.approximate for u in usages),
    )


def chain_usage(
    job_ids: list[str],
    accounting: Mapping[str, list[AccountingRow]],
    own: Mapping[str, list[OwnRecord]],
    planned_gpus: int | None,
    now: float | None,
    running_id: str | None,
) -> Usage:
    """A benchmark's jobs (a resumable chain's, oldest first) summed."""
    return total(job_usage(i, accounting, own, planned_gpus, now, i == running_id) for i in job_ids)


def _float(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def hours_text(usage: Usage) -> str:
    """``1.25`` (GPU-hours), ``~1.25`` when some end was guessed, ``-`` when unknown."""
    if usage.gpu_hours is None:
        return "-"
    return ("~" if usage.approximate else "") + f"{usage.gpu_hours:.2f}"


def wall_text(usage: Usage) -> str:
    """``1h02m``, ``4m05s``, ``59s``; ``~`` in front when some end was guessed; ``-`` when unknown."""
    if usage.wall_seconds is None:
        return "-"
    seconds = round(usage.wall_seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    text = f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"
    return ("~" if usage.approximate else "") + text
