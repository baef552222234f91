"""A job directory's files -> the ``ExportRecord`` of its benchmark. Read on the node, after the driver.

What each field comes from:

* metrics: every ``artifacts/*aggregate_metrics*.json`` gym wrote, named as everywhere
  (``facts.benchmark_metrics``);
* completeness: distinct (``_ng_task_index``, ``_ng_rollout_index``) pairs in ``rollouts.jsonl``
  that ``rollouts_materialized_inputs.jsonl`` lists, of all it lists (``facts``: the same rule as
  ``gym eval results``);
* wall time: every run of the job directory's jobs (``.gym/<id>/events``: a requeued job's earlier
  attempts and a resumable chain's jobs add up), each as status counts it (``facts.wall_seconds``:
  to ``job-end``, the job running the export to now, one that died to its last sign of life);
  GPU-hours: that times the GPUs the spec says the job was given;
* state: said by the caller (the job knows its driver's exit), else the state file's final phase,
  else the driver's exit status in the events; ``succeeded`` with samples missing is ``incomplete``.

Stdlib only, Python 3.8 syntax.
"""

from __future__ import annotations

import glob
import os
import time

from nemo_gym.orchestration import contract as c
from nemo_gym.orchestration import facts as f
from nemo_gym.orchestration import untrusted as u
from nemo_gym.orchestration.exporters import record as r
from nemo_gym.orchestration.exporters import spec as s

# -- metrics -----------------------------------------------------------------------------------------


def read_metrics(job_dir: str) -> tuple[dict[str, float], list[str]]:
    documents = []
    notes = []
    for path in sorted(glob.glob(os.path.join(job_dir, c.AGGREGATE_METRICS_GLOB))):
        what = os.path.relpath(path, job_dir)
        try:
            documents.append(u.loads(u.read_bounded(path, what), what))
        except u.Unreadable:
            notes.append(f"unreadable metrics file {what}")
    metrics = f.benchmark_metrics(documents).values
    if not metrics and not notes:
        notes.append("no aggregate metrics file")
    return metrics, notes


# -- completeness ------------------------------------------------------------------------------------


def read_completeness(job_dir: str) -> tuple[int, int | None, list[str]]:
    """(expected samples written, expected or None, notes)."""
    check, notes = f.job_completeness(job_dir)
    return check.done, check.expected, notes


# -- times and state -----------------------------------------------------------------------------------


def state_dirs(job_dir: str) -> dict[str, str]:
    """State directory name (``<id>`` or ``<id>.attempt-<n>``) -> its path, for each that has events
    or a state file."""
    root = os.path.join(job_dir, c.MARKERS_DIR)
    out = {}
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return {}
    for name in names:
        path = os.path.join(root, name)
        if os.path.isfile(os.path.join(path, c.EVENTS_FILE)) or os.path.isfile(os.path.join(path, c.STATE_FILE)):
            out[name] = path
    return out


def job_times(
    job_dir: str, dirs: dict[str, str], events: dict[str, str], current: str | None, now: float
) -> tuple[float | None, float | None, float | None]:
    """(wall seconds, first start, last end) of the runs whose state directories these are (name ->
    path; ``events``: name -> its events' text), each counted as status counts it: to its
    ``job-end``; the current one (running the export, before the job ends) to now; one that died
    without its end record to its last sign of life."""
    wall = 0.0
    starts: list[float] = []
    ends: list[float] = []
    for name in dirs:
        mtimes = f.mtimes_of(f.sign_of_life_files(job_dir, name))
        times = f.times_of_events(f.parse_events(events.get(name, "")), mtimes)
        if times.start is None:
            continue
        seconds, _approximate = f.wall_seconds(times, now, running=name == current)
        wall += seconds
        starts.append(times.start)
        ends.append(times.start + seconds)
    if not starts:
        return None, None, None
    return wall, min(starts), max(ends)


def shards_times(bench_dir: str, current: str | None, now: float) -> tuple[float | None, float | None, float | None]:
    """``job_times`` of a sharded benchmark: its shards' jobs summed, first start to last end."""
    wall = 0.0
    starts: list[float] = []
    ends: list[float] = []
    for shard_dir in sorted(glob.glob(c.shard_dir(glob.escape(bench_dir), "*"))):
        dirs = state_dirs(shard_dir)
        events = {name: _read(os.path.join(path, c.EVENTS_FILE)) for name, path in dirs.items()}
        seconds, start, end = job_times(shard_dir, dirs, events, current, now)
        if seconds is None or start is None or end is None:
            continue
        wall += seconds
        starts.append(start)
        ends.append(end)
    if not starts:
        return None, None, None
    return wall, min(starts), max(ends)


def driver_exit(events_text: str, benchmark: str) -> int | None:
    """The driver's exit status in a job's events: ``driver-end RC``, or ``driver-end BENCH RC`` in
    a shared job; the last one counts."""
    found = None
    for _, event, args in f.parse_events(events_text):
        if event != c.EVENT_DRIVER_END:
            continue
        if len(args) == 1:
            found = args[0]
        elif len(args) == 2 and args[0] == benchmark:
            found = args[1]
    return int(found) if found is not None and c.is_count(found.lstrip("-")) else None


def benchmark_state(
    explicit: c.Status | None, phase: c.Phase | None, exit_status: int | None, written: int, expected: int | None
) -> c.Status:
    if explicit is not None:
        state = explicit
    elif phase is not None and phase.ended:
        state = c.Status.of(phase)
    elif exit_status is not None:
        state = c.Status.SUCCEEDED if exit_status == 0 else c.Status.FAILED
    else:
        state = c.Status.of(phase) if phase is not None else c.Status.UNKNOWN
    if state == c.Status.SUCCEEDED and expected is not None and written < expected:
        return c.Status.INCOMPLETE
    return state


def _read(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read()
    except OSError:
        return ""


def _latest(dirs: dict[str, str]) -> str | None:
    """The state directory written to last (the current or the last job of the directory)."""

    def stamp(name: str) -> float:
        times = []
        for file_name in (c.STATE_FILE, c.EVENTS_FILE):
            try:
                times.append(os.path.getmtime(os.path.join(dirs[name], file_name)))
            except OSError:
                continue
        return max(times) if times else 0.0

    return max(dirs, key=stamp) if dirs else None


# -- the record ----------------------------------------------------------------------------------------


def read_record(
    job_dir: str, spec: s.ExportSpec, job_id: str | None = None, state: c.Status | None = None, now: float | None = None
) -> r.ExportRecord:
    """The export record of the job directory's benchmark.

    ``job_id``: the job running the export (its state directory's name; the job's own run counts
    to now); ``state``: the benchmark's state when the caller knows it better than the files.
    """
    now = time.time() if now is None else now
    metrics, metric_notes = read_metrics(job_dir)
    written, expected, completeness_notes = read_completeness(job_dir)
    usage_dir = os.path.normpath(os.path.join(job_dir, spec.usage_dir)) if spec.usage_dir else job_dir
    usage_dirs = state_dirs(usage_dir)
    events = {name: _read(os.path.join(path, c.EVENTS_FILE)) for name, path in usage_dirs.items()}
    wall, started, ended = job_times(usage_dir, usage_dirs, events, job_id, now)
    own_dirs = state_dirs(job_dir)
    current = job_id if job_id in own_dirs else _latest(own_dirs)
    phase = c.StateFile.parse(_read(os.path.join(own_dirs[current], c.STATE_FILE))).phase if current else None
    usage_current = job_id if job_id in usage_dirs else _latest(usage_dirs)
    exit_status = driver_exit(events[usage_current], spec.benchmark) if usage_current else None
    if os.path.isfile(os.path.join(job_dir, c.SHARDS_MERGED_FILE)):
        # A sharded benchmark its shards merged: succeeded, timed by every shard's jobs together.
        wall, started, ended = shards_times(job_dir, job_id, now)
        phase, exit_status = c.Phase.SUCCEEDED, 0
    rollouts = os.path.join(job_dir, c.ROLLOUTS_FILE)
    return r.ExportRecord(
        run_id=spec.run_id,
        sweep_id=spec.sweep_id,
        benchmark=spec.benchmark,
        model=spec.model,
        served_name=spec.served_name,
        params=dict(spec.params),
        metrics=metrics,
        written=written,
        expected=expected,
        gpu_hours=wall * spec.gpus / 3600 if wall is not None and spec.gpus is not None else None,
        wall_seconds=wall,
        state=benchmark_state(state, phase, exit_status, written, expected),
        rollouts_path=rollouts if os.path.isfile(rollouts) else None,
        started_at=started,
        ended_at=ended,
        notes=tuple(spec.params_notes) + tuple(metric_notes) + tuple(completeness_notes),
        step=spec.step,
    )
