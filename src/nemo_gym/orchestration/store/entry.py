"""One entry of the store: a run's benchmark (one attempt of it) as its results read, with the
facts a history needs kept beside the numbers (the model and its step, who ran it where, the
per-task scores that a paired comparison needs later, without the run's directory)."""

from __future__ import annotations

import math
import posixpath
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from nemo_gym.orchestration import contract, untrusted
from nemo_gym.orchestration.record import machine_of, now_utc
from nemo_gym.orchestration.results import BenchmarkResult, RunResults
from nemo_gym.orchestration.rules import TAG_RE, TAGS_MAX
from nemo_gym.orchestration.watch_state import step_of
from nemo_gym.orchestration.yamlio import load_yaml

WEIGHTS_FINGERPRINT_KEY = "weights.fingerprint"  # weights.py's provenance key for the loaded weights
# The resolved config is read back from the run directory (untrusted): only job.training_step of it.
CONFIG_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class Entry:
    run_id: str
    benchmark: str
    attempt: int  # 1, or 1 + how many times gym eval resubmit queued the benchmark again
    submitted_at: str
    state: str
    samples: int
    metric: str
    sweep_id: str | None = None
    model: str | None = None
    step: int | None = None
    weights_fingerprint: str | None = None
    submitted_by: str | None = None
    submitted_host: str | None = None
    complete: bool | None = None
    expected_samples: int | None = None
    value: float | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    gpu_hours: float | None = None
    wall_seconds: float | None = None
    inputs_digest: str | None = None
    results_fingerprint: str | None = None
    task_scores: dict[int, float] = field(default_factory=dict)
    written_at: str = ""
    tags: tuple[str, ...] = ()  # the run's job.tags

    @property
    def partial(self) -> bool:
        """Not every sample it expected was written (or the count is unknown), as results says:
        shown marked, never a best checkpoint, never one side of a regression."""
        return self.complete is not True

    def row(self) -> dict[str, Any]:
        """The entry as the table's columns (JSON has no NaN, infinity or integer keys)."""
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out["value"] = _finite(self.value)
        out["metrics"] = {k: v for k, v in self.metrics.items() if _finite(v) is not None}
        out["task_scores"] = {str(k): v for k, v in self.task_scores.items() if _finite(v) is not None}
        out["written_at"] = self.written_at or now_utc()
        out["tags"] = tags_column(self.tags)
        return out

    @classmethod
    def from_row(cls, row: Any) -> Entry:
        values = dict(row._mapping)
        values["task_scores"] = {int(k): float(v) for k, v in (values["task_scores"] or {}).items()}
        values["metrics"] = dict(values["metrics"] or {})
        values["tags"] = tuple(tag for tag in (values.get("tags") or "").split(",") if tag)
        return cls(**values)


def tags_column(tags: tuple[str, ...]) -> str | None:
    """Tags as the store keeps them: one text, each tag between commas (``,a,b,``), so that one tag
    is found by a substring match every database does alike; None without tags."""
    return "," + ",".join(tags) + "," if tags else None


def entry_problem(entry: Entry) -> str | None:
    """Why ``entry`` cannot be stored as it is, on every database alike (a record read back may
    hold anything): a text longer than its column, or one no database keeps (NUL, lone surrogates)."""
    from nemo_gym.orchestration.store.schema import entries

    for column in entries.columns:
        value = getattr(entry, column.name)
        if not isinstance(value, str):
            continue
        limit = getattr(column.type, "length", None)
        if limit is not None and len(value) > limit:
            return f"its {column.name} is {len(value)} characters long, over the store's {limit}"
        if not keepable_text(value):
            return f"its {column.name} holds a NUL or bytes that were not UTF-8"
    return None


def keepable_text(text: str) -> bool:
    """Whether every database keeps (and compares with) ``text`` as it is: PostgreSQL refuses NUL,
    and a lone surrogate (a byte that was not UTF-8) cannot be sent to it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text


@dataclass(frozen=True)
class RunLabels:
    """What a run's resolved config says of it beyond its record: ``job.training_step`` and
    ``job.tags`` (read by ``run_labels_in``)."""

    training_step: int | None = None
    tags: tuple[str, ...] = ()


def entries_of(run: RunResults, labels: RunLabels | None = None) -> list[Entry]:
    """The store's entries of one run's results: one per benchmark, at its current attempt. The
    step is the run's ``job.training_step`` (``labels``); without it, the number the model's last
    path component names (``checkpoints.step_of``)."""
    labels = labels or RunLabels()
    record = run.record
    model = record.model
    step = labels.training_step if labels.training_step is not None else _step_of_model(model)
    attempts = {status.benchmark: 1 + status.resubmits for status in run.statuses}
    return [
        _entry(result, run, attempts.get(result.benchmark, 1), model, step, labels.tags) for result in run.benchmarks
    ]


def storable(run: RunResults, labels: RunLabels | None = None) -> tuple[list[Entry], list[str]]:
    """The entries of ``run`` the store can take now (its finished benchmarks), and a line for each
    one it cannot (``benchmark NAME: why``)."""
    kept, refused = [], []
    states = run.states
    for entry in entries_of(run, labels):
        problem = entry_problem(entry)
        if not states[entry.benchmark].final:
            problem = f"it is {entry.state}, not finished; write it again once it ends"
        if problem:
            refused.append(f"benchmark {entry.benchmark}: {problem}")
        else:
            kept.append(entry)
    return kept, refused


def _entry(
    result: BenchmarkResult, run: RunResults, attempt: int, model: str | None, step: int | None, tags: tuple[str, ...]
) -> Entry:
    record = run.record
    return Entry(
        run_id=record.gym_job_id,
        benchmark=result.benchmark,
        attempt=attempt,
        submitted_at=record.submitted_at,
        state=str(result.state),
        samples=result.samples,
        metric=result.metric,
        sweep_id=record.sweep_id,
        model=model,
        step=step,
        weights_fingerprint=result.provenance.get(WEIGHTS_FINGERPRINT_KEY),
        submitted_by=record.submitted_by,
        submitted_host=machine_of(record.submitted_from) or record.hostname,
        complete=result.complete,
        expected_samples=result.expected_samples,
        value=result.value,
        metrics=dict(result.metrics),
        gpu_hours=result.usage.gpu_hours,
        wall_seconds=result.usage.wall_seconds,
        inputs_digest=result.inputs_digest,
        results_fingerprint=result.results_fingerprint,
        task_scores=dict(result.task_means),
        tags=tags,
    )


def _step_of_model(model: str | None) -> int | None:
    return step_of(posixpath.basename(model.rstrip("/"))) if model else None


def run_labels_in(run_dir: str) -> RunLabels:
    """``job.training_step`` and ``job.tags`` as the run directory's resolved config keeps them;
    none when it has none or the file cannot be read (it is data from anywhere: bounded, and only an
    integer step and tags the config rules allow are taken)."""
    path = Path(run_dir) / contract.RESOLVED_CONFIG_FILE
    try:
        text = untrusted.decode(untrusted.read_bounded(path, str(path), CONFIG_MAX_BYTES), str(path))
        config = load_yaml(text)
    except (untrusted.Unreadable, OSError, yaml.YAMLError):  # nothing known of it
        return RunLabels()
    job = config.get("job") if isinstance(config, dict) else None
    job = job if isinstance(job, dict) else {}
    step = job.get("training_step")
    step = step if isinstance(step, int) and not isinstance(step, bool) and step >= 0 else None
    tags = job.get("tags")
    kept = [t for t in tags if isinstance(t, str) and TAG_RE.fullmatch(t)] if isinstance(tags, list) else []
    return RunLabels(step, tuple(dict.fromkeys(kept))[:TAGS_MAX])


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
