"""A job directory's files -> the ``ExportRecord`` of its benchmark. Read on the node, after the driver.

What each field comes from:

* metrics: every ``artifacts/*aggregate_metrics*.json`` gym wrote: each agent's ``agent_metrics``
  and ``key_metrics`` (per-task groups are left out: they are rollouts, not aggregates);
* completeness: distinct (``_ng_task_index``, ``_ng_rollout_index``) pairs in ``rollouts.jsonl``
  that ``rollouts_materialized_inputs.jsonl`` lists, of all it lists (duplicates, torn lines and
  rows of other inputs do not count; the same rule as ``gym eval results``);
* wall time: ``job-start`` to ``job-end`` in every ``.gym/<id>/events`` of the job directory (a
  requeued job's earlier attempts and a resumable chain's jobs add up), the job still running
  counted to now; GPU-hours: that times the GPUs the spec says the job was given;
* state: said by the caller (the job knows its driver's exit), else the state file's final phase,
  else the driver's exit status in the events; ``succeeded`` with samples missing is ``incomplete``.

Stdlib only, Python 3.8 syntax.
"""

from __future__ import annotations

import glob
import json
import math
import os
import time
from typing import Any

if __package__:
    from .. import contract as c
    from . import record as r
    from . import spec as s
else:  # staged into a job: contract.py and the exporters' modules sit side by side
    import contract as c  # type: ignore[no-redef,import-not-found]
    import record as r  # type: ignore[no-redef,import-not-found]
    import spec as s  # type: ignore[no-redef,import-not-found]

TASK_INDEX_KEY = "_ng_task_index"
ROLLOUT_INDEX_KEY = "_ng_rollout_index"
# Parts of gym's aggregate document that are per task or per repeat: many rows, no aggregate.
NOT_AGGREGATES = ("group_level_metrics", "repeat_level_metrics")
FINAL_PHASES = (c.PHASE_SUCCEEDED, c.PHASE_FAILED, c.PHASE_CANCELLED)
STATE_UNKNOWN = "unknown"


# -- metrics -----------------------------------------------------------------------------------------


def metrics_of_document(doc: Any) -> dict[str, float]:
    """gym's aggregate metrics document -> metric name -> value.

    gym 0.7.0 writes a list with one entry per agent, each with ``agent_metrics`` and
    ``key_metrics``: with one agent the names are gym's own (``mean/reward``), with several they
    are prefixed by the agent's name. Any other shape contributes its numbers under their paths.
    """
    if isinstance(doc, list) and doc and all(isinstance(e, dict) and "agent_metrics" in e for e in doc):
        out: dict[str, float] = {}
        for entry in doc:
            prefix = f"{_agent_name(entry)}/" if len(doc) > 1 else ""
            for part in ("agent_metrics", "key_metrics"):
                for name, value in _numbers(entry.get(part)).items():
                    out[prefix + name] = value
        return out
    return _numbers(doc)


def _agent_name(entry: dict[str, Any]) -> str:
    ref = entry.get("agent_ref")
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name) if name else "agent"


def _numbers(data: Any, prefix: str = "") -> dict[str, float]:
    """Finite numbers of nested mappings under ``a/b`` paths; lists and per-task parts are skipped."""
    out: dict[str, float] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            if key in NOT_AGGREGATES:
                continue
            out.update(_numbers(value, f"{prefix}{key}/" if isinstance(value, dict) else f"{prefix}{key}"))
    elif isinstance(data, (int, float)) and not isinstance(data, bool) and math.isfinite(data):
        out[prefix.rstrip("/")] = float(data)
    return out


def read_metrics(job_dir: str) -> tuple[dict[str, float], list[str]]:
    metrics: dict[str, float] = {}
    notes = []
    for path in sorted(glob.glob(os.path.join(job_dir, c.AGGREGATE_METRICS_GLOB))):
        try:
            with open(path) as fh:
                metrics.update(metrics_of_document(json.load(fh)))
        except (OSError, ValueError):
            notes.append(f"unreadable metrics file {os.path.relpath(path, job_dir)}")
    if not metrics and not notes:
        notes.append("no aggregate metrics file")
    return metrics, notes


# -- completeness ------------------------------------------------------------------------------------


def _pair(line: bytes) -> tuple[int, int] | None:
    try:
        row = json.loads(line)
    except ValueError:
        return None
    if not isinstance(row, dict):
        return None
    task, rollout = row.get(TASK_INDEX_KEY), row.get(ROLLOUT_INDEX_KEY)
    if type(task) is int and type(rollout) is int:  # true is no index, nor is 3.0
        return task, rollout
    return None


def written_pairs(lines: Any) -> set[tuple[int, int]]:
    """Distinct pairs of the readable rows; a torn last line or a duplicate changes nothing."""
    pairs = set()
    for line in lines:
        pair = _pair(line) if line.strip() else None
        if pair is not None:
            pairs.add(pair)
    return pairs


def expected_pairs(lines: Any) -> set[tuple[int, int]] | None:
    """The pairs gym meant to write; None when a line is bad (gym writes the list whole before any
    rollout, so a bad line means it cannot be trusted: a shortened list would fake completeness)."""
    pairs = set()
    for line in lines:
        if not line.strip():
            continue
        pair = _pair(line)
        if pair is None:
            return None
        pairs.add(pair)
    return pairs


def read_completeness(job_dir: str) -> tuple[int, int | None, list[str]]:
    """(written, expected or None, notes)."""
    notes = []
    written: set[tuple[int, int]] = set()
    try:
        with open(os.path.join(job_dir, c.ROLLOUTS_FILE), "rb") as fh:
            written = written_pairs(fh)
    except OSError:
        notes.append("no rollouts file")
    expected: set[tuple[int, int]] | None = None
    try:
        with open(os.path.join(job_dir, c.MATERIALIZED_INPUTS_FILE), "rb") as fh:
            expected = expected_pairs(fh)
        if expected is None:
            notes.append(f"{os.path.basename(c.MATERIALIZED_INPUTS_FILE)} cannot be trusted: completeness unknown")
    except OSError:
        notes.append(f"no {os.path.basename(c.MATERIALIZED_INPUTS_FILE)}: completeness unknown")
    if expected is None:
        return len(written), None, notes
    return len(written & expected), len(expected), notes


# -- times and state -----------------------------------------------------------------------------------


def parse_event_lines(text: str) -> list[tuple[float, str, list[str]]]:
    """``<epoch> <event> [args]`` lines -> (time, event, args), bad lines skipped."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 2:
            continue
        try:
            stamp = float(words[0])
        except ValueError:
            continue
        out.append((stamp, words[1], words[2:]))
    return out


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


def job_times(events: dict[str, str], current: str | None, now: float) -> tuple[float | None, float | None, float | None]:
    """(wall seconds, first start, last end) of the jobs whose events these are (name -> text).

    A job without ``job-end`` counts to now when it is the current one (the export runs before the
    job ends), else to the last event it wrote (it died without a record).
    """
    wall = 0.0
    starts: list[float] = []
    ends: list[float] = []
    for name, text in events.items():
        lines = parse_event_lines(text)
        start = next((t for t, event, _ in lines if event == c.EVENT_JOB_START), None)
        if start is None:
            continue
        finished = [t for t, event, _ in lines if event == c.EVENT_JOB_END]
        if finished:
            end = finished[-1]
        elif name == current:
            end = now
        else:
            end = max(t for t, _, _ in lines)
        wall += max(0.0, end - start)
        starts.append(start)
        ends.append(end)
    if not starts:
        return None, None, None
    return wall, min(starts), max(ends)


def driver_exit(events_text: str, benchmark: str) -> int | None:
    """The driver's exit status in a job's events: ``driver-end RC``, or ``driver-end BENCH RC`` in
    a shared job; the last one counts."""
    found = None
    for _, event, args in parse_event_lines(events_text):
        if event != c.EVENT_DRIVER_END:
            continue
        if len(args) == 1:
            found = args[0]
        elif len(args) == 2 and args[0] == benchmark:
            found = args[1]
    return int(found) if found is not None and found.lstrip("-").isdigit() else None


def benchmark_state(explicit: str | None, phase: str | None, exit_status: int | None, written: int,
                    expected: int | None) -> str:  # fmt: skip
    if explicit:
        state = explicit
    elif phase in FINAL_PHASES:
        state = phase
    elif exit_status is not None:
        state = c.PHASE_SUCCEEDED if exit_status == 0 else c.PHASE_FAILED
    else:
        state = phase or STATE_UNKNOWN
    if state == c.PHASE_SUCCEEDED and expected is not None and written < expected:
        return c.STATE_INCOMPLETE
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
        for f in (c.STATE_FILE, c.EVENTS_FILE):
            try:
                times.append(os.path.getmtime(os.path.join(dirs[name], f)))
            except OSError:
                continue
        return max(times) if times else 0.0

    return max(dirs, key=stamp) if dirs else None


# -- the record ----------------------------------------------------------------------------------------


def read_record(job_dir: str, spec: s.ExportSpec, job_id: str | None = None, state: str | None = None,
                now: float | None = None) -> r.ExportRecord:  # fmt: skip
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
    wall, started, ended = job_times(events, job_id, now)
    own_dirs = state_dirs(job_dir)
    current = job_id if job_id in own_dirs else _latest(own_dirs)
    phase = c.parse_state(_read(os.path.join(own_dirs[current], c.STATE_FILE))).get("phase") if current else None
    usage_current = job_id if job_id in usage_dirs else _latest(usage_dirs)
    exit_status = driver_exit(events[usage_current], spec.benchmark) if usage_current else None
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
    )
