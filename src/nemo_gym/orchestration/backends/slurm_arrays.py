"""Which of a sweep's jobs go to Slurm as one job array (pure rules; the Slurm backend renders
them). Slurm keeps a pending array as one record, so one sbatch queues its tasks, one scancel
``ID_[...]`` cancels them, and a 300-run sweep costs slurmctld what a few jobs do; each task is
still counted as a job by the site's limits (``MaxSubmitJobs``), so the limits and lanes are
weighed per task as before.

A task is one benchmark's job exactly as it would be alone: its own job directory and job script,
its id ``ARRAY_TASK`` (``1200_5``) everywhere the job's id is (state directory, chain, logs). The
array's script only picks the task's job directory from a manifest by ``SLURM_ARRAY_TASK_ID`` and
runs its job script there, so every script a task runs is the one a single job would have run.
Jobs share an array only when Slurm would treat them alike: the same options (bar the job's
name, directory and log, which the task's script sets itself) and the same secrets. A
heterogeneous job is never one (Slurm has no arrays of them), nor a job that asks for its own
``array``, nor a resumable job (it queues its own successor, and keeps a single id per chain
link), nor a job of a lane (queued by the job before it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from nemo_gym.orchestration import contract

if TYPE_CHECKING:
    from nemo_gym.orchestration.plan.model import JobPlan

# Jobs of one shape go as arrays from this many on: below, slurmctld's cost per job is small and
# a job of its own (one id, one line in squeue) is what users read most easily.
ARRAYS_FROM = 8

# Slurm's MaxArraySize when the site's configuration does not say (task indices 0..1000).
DEFAULT_MAX_ARRAY_SIZE = 1001

# In the first task's job directory: the array's script, its manifest (a task's job directory a
# line, task 0 first) and its log.
ARRAY_SCRIPT = f"{contract.MARKERS_DIR}/array.sh"
ARRAY_MANIFEST = f"{contract.MARKERS_DIR}/array-manifest"
ARRAY_LOG_PATTERN = f"{contract.MARKERS_DIR}/array-%A_%a.out"

# Options each task's own job script sets for itself (its directory and log), or that only name
# it: jobs that differ in these alone are of one shape.
_PER_JOB_OPTIONS = frozenset({"job-name", "chdir", "output"})

Directives = tuple[tuple[str, str | None], ...]
Secrets = tuple[tuple[str, str], ...]  # a run's, (name, value): ``backends.base.Secrets``


@dataclass(frozen=True)
class Array:
    """One sbatch --array: its tasks' job directories, task i the i-th; the options they share."""

    options: Directives
    job_dirs: tuple[str, ...]
    secrets: tuple[tuple[str, str], ...]  # its jobs' runs' secrets, (name, value) (the same for all of them)
    throttle: int | None = None  # at most this many of its tasks at once (job.max_concurrent)

    @property
    def indices(self) -> str:
        """sbatch's ``--array`` value: every task, throttled where asked."""
        return f"0-{len(self.job_dirs) - 1}" + (f"%{self.throttle}" if self.throttle else "")

    @property
    def home(self) -> str:
        """The job directory that holds the array's script and manifest: its first task's."""
        return self.job_dirs[0]


def arrays(units: Sequence[tuple[JobPlan, Secrets]], fed: Mapping[str, str], most: int) -> list[Array]:
    """The arrays the jobs ``units`` (each with its run's secrets) are queued in, in the
    order of their first jobs: the jobs of each shape with at least ``ARRAYS_FROM`` of them (a
    sharded benchmark's shards: from two), in arrays of at most ``most`` (the site's MaxArraySize)
    and at least two; a job in none is queued on its own. ``fed``: the jobs of lanes (by directory)."""
    if most < 2:
        return []
    shapes: dict[tuple[Directives, Secrets, str | None, int | None], list[str]] = {}
    for job, secrets in units:
        if _arrayable(job, fed):
            # A sharded benchmark's shards are an array of their own, however few.
            shards_of = job.shard.bench_dir if job.shard is not None else None
            key = (shape(job.directives[0]), secrets, shards_of, job.max_concurrent)
            shapes.setdefault(key, []).append(job.job_dir)
    found = []
    for (options, secrets, shards_of, throttle), dirs in shapes.items():
        # Throttled jobs go as arrays however few (the throttle is the array's).
        if len(dirs) < (2 if shards_of is not None or throttle else ARRAYS_FROM):
            continue
        for start in range(0, len(dirs), most):
            chunk = tuple(dirs[start : start + most])
            if len(chunk) > 1:
                found.append(Array(_array_options(options, chunk), chunk, secrets, throttle))
    place = {job.job_dir: i for i, (job, _) in enumerate(units)}
    return sorted(found, key=lambda a: place[a.home])


def shape(directives: Directives) -> Directives:
    """A job's options without those that only name it, place it or its log."""
    return tuple((option, value) for option, value in directives if option not in _PER_JOB_OPTIONS)


def task_ids(array_id: str, tasks: int) -> list[str]:
    """The ids Slurm gives the tasks of array ``array_id``: ``ID_0`` .. ``ID_{tasks-1}``."""
    return [f"{array_id}_{i}" for i in range(tasks)]


def _arrayable(job: JobPlan, fed: Mapping[str, str]) -> bool:
    return (
        len(job.directives) == 1
        and job.resume is None
        and job.job_dir not in fed
        and not any(option == "array" for option, _ in job.directives[0])
    )


def _array_options(options: Directives, job_dirs: tuple[str, ...]) -> Directives:
    # The array's own log holds only what its script says before a task's job script takes over
    # (its own log, beside its job's), kept in the first task's job directory.
    return (("job-name", "gym-array"), *options, ("output", f"{job_dirs[0]}/{ARRAY_LOG_PATTERN}"))
