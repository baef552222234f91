"""A run's results, told so that they can be trusted: every benchmark's aggregate metrics, its
samples checked against the ones gym meant to write, its metric per task for comparisons, and what
its jobs cost.

One script over the run's connection reads every benchmark's metrics files and its two rollout
files, the latter cut down where they lie to the indices and the metric of each row
(``rollout_projection``: kilobytes a row become bytes). Everything is decided here in Python from
the exact rows (``rollouts.py``): a benchmark whose driver finished but left expected samples
unwritten is ``incomplete``, never ``succeeded``; partial numbers are shown as partial.

Nothing unknown reads as complete: without a readable list of the expected samples a benchmark's
``complete`` is None (unknown, with the reason), and rows whose metric is no score (NaN, infinite,
a string, absent) make its value partial, the rows named. Every file is data from anywhere: a
metrics file is read bounded (``untrusted``), an unreadable one is one line of the note.
"""

from __future__ import annotations

import base64
import json
import math
import shlex
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nemo_gym.orchestration import contract, facts, shipping, untrusted
from nemo_gym.orchestration.connection import Connection
from nemo_gym.orchestration.contract import Status
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.facts import MAX_ROW_BYTES
from nemo_gym.orchestration.observe import JobStatus, run_usage
from nemo_gym.orchestration.record import SubmissionRecord
from nemo_gym.orchestration.render import render_template
from nemo_gym.orchestration.rollouts import (
    Completeness,
    NoScore,
    RepeatSpread,
    RolloutSet,
    TaskRollout,
    completeness,
    parse_expected,
    parse_rollouts,
    per_task_means,
    repeat_spread,
)
from nemo_gym.orchestration.shipping import Program
from nemo_gym.orchestration.submission import split_by_run
from nemo_gym.orchestration.usage import NO_USAGE, Usage

MARKER = contract.RESULT_MARKER
DEFAULT_METRIC = "reward"
# Metric names shown in the table, most telling first (gym's names, made the one name each has
# everywhere: ``facts.mlflow_safe_key``); the JSON has every metric.
PREFERRED = tuple(
    facts.mlflow_safe_key(name) for name in ("mean/reward", "pass@1/accuracy", "pass@1/f1", "mean_reward", "accuracy")
)
NO_EXPECTED_LIST = (
    f"no {Path(contract.MATERIALIZED_INPUTS_FILE).name} (gym before 0.7.0 writes none): nothing lists the samples "
    f"the driver meant to write"
)
TOO_LARGE = "!too-large"  # in place of a metrics file's base64: it is over the bound, not sent
# Unscoreable rows listed in --json (all are counted); the table names fewer.
UNSCOREABLE_LISTED = 50


@dataclass(frozen=True)
class Unscoreable:
    """A written row whose metric is no score: it is left out of the value, which is then partial."""

    task: int
    rollout: int
    why: NoScore

    def text(self) -> str:
        return f"task {self.task} rollout {self.rollout} ({self.why.value})"

    def as_dict(self) -> dict[str, Any]:
        return {"task": self.task, "rollout": self.rollout, "why": self.why.value}


@dataclass
class BenchmarkResult:
    benchmark: str
    state: Status  # the job's; ``incomplete`` when it succeeded but left samples missing
    samples: int  # expected (task, rollout) pairs written, each counted once (all written when unknown)
    expected_samples: int | None = None  # None: gym wrote no list of what it meant to write
    missing: list[TaskRollout] = field(default_factory=list)
    duplicates: int = 0  # rows repeating a pair already written (counted once)
    extra_samples: int = 0  # written pairs that were not expected
    unreadable_lines: int = 0
    metric: str = DEFAULT_METRIC
    value: float | None = None  # the metric's mean over tasks (each task's rollouts averaged first)
    scored_tasks: int = 0
    written_tasks: int = 0  # tasks with a counted row, scored or not
    metrics: dict[str, float] = field(default_factory=dict)  # gym's aggregate metrics (``facts.benchmark_metrics``)
    key_metrics: list[str] = field(default_factory=list)  # the names of those gym calls key; not in the JSON
    files: list[str] = field(default_factory=list)
    note: str | None = None  # why the numbers are not (all) to be trusted
    # True: succeeded, every expected sample written and scored, metrics written; None: nothing says
    # otherwise but there is no (readable) list of the expected samples; False: any of it is not so.
    complete: bool | None = False
    completeness_reason: str | None = None  # why ``complete`` is not True
    unscoreable: list[Unscoreable] = field(default_factory=list)  # counted rows without a score
    usage: Usage = NO_USAGE
    task_means: dict[int, float] = field(default_factory=dict)  # for compare; not in the JSON
    spread: RepeatSpread | None = None  # how its repeats spread, for gym eval plan; not in the JSON
    task_groups: dict[int, str] = field(default_factory=dict)  # task -> group (``group_key``); not in the JSON
    metric_names: list[str] = field(default_factory=list)  # numeric keys the rows carry
    inputs_digest: str | None = None  # facts.inputs_digest of the materialized inputs; None without them
    results_fingerprint: str | None = None  # facts.results_fingerprint of the rows' scores
    provenance: dict[str, str] = field(default_factory=dict)  # what the job ran, as its nodes saw it

    @property
    def partial(self) -> bool:
        return self.complete is not True

    def samples_text(self) -> str:
        """``12/12``, ``9/12``, or ``12/?`` when the expected count is unknown."""
        return f"{self.samples}/{self.expected_samples if self.expected_samples is not None else '?'}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "state": self.state,
            "complete": self.complete,
            "completeness_reason": self.completeness_reason,
            "expected_samples": self.expected_samples,
            "samples": self.samples,
            "missing": [{"task": t, "rollout": r} for t, r in self.missing],
            "duplicates": self.duplicates,
            "extra_samples": self.extra_samples,
            "unreadable_lines": self.unreadable_lines,
            "metric": self.metric,
            "value": _json_number(self.value),
            "scored_tasks": self.scored_tasks,
            "written_tasks": self.written_tasks,
            "unscoreable_rows": len(self.unscoreable),
            "unscoreable": [u.as_dict() for u in self.unscoreable[:UNSCOREABLE_LISTED]],
            "metrics": {k: _json_number(v) for k, v in self.metrics.items()},
            "files": self.files,
            "note": self.note,
            "gpus": self.usage.gpus,
            "gpu_hours": _rounded(self.usage.gpu_hours, 4),
            "wall_seconds": _rounded(self.usage.wall_seconds, 1),
            "usage_source": self.usage.source,
            "usage_approximate": self.usage.approximate,
            "inputs_digest": self.inputs_digest,
            "results_fingerprint": self.results_fingerprint,
            "provenance": dict(self.provenance),
        }


@dataclass(frozen=True)
class RunResults:
    record: SubmissionRecord
    statuses: list[JobStatus]
    benchmarks: list[BenchmarkResult]

    @property
    def states(self) -> dict[str, Status]:
        return {r.benchmark: r.state for r in self.benchmarks}

    @property
    def complete(self) -> bool | None:
        """True when every benchmark is; False when any is not; else None (unknown)."""
        return all_complete(r.complete for r in self.benchmarks)

    @property
    def usage(self) -> Usage:
        return run_usage(self.statuses)

    def as_dict(self) -> dict[str, Any]:
        total = self.usage
        return {
            "run": self.record.gym_job_id,
            "run_dir": self.record.run_dir,
            "sweep_id": self.record.sweep_id,
            "values": self.record.sweep_values,
            "complete": self.complete,
            "gpu_hours": _rounded(total.gpu_hours, 4),
            "wall_seconds": _rounded(total.wall_seconds, 1),
            "benchmarks": [r.as_dict() for r in self.benchmarks],
        }


def all_complete(flags: Any) -> bool | None:
    """True when every flag is True, False when any is False, else None: unknown is never complete."""
    seen = list(flags)
    return False if False in seen else None if None in seen else True


# -- reading a run's files ---------------------------------------------------------------------------


def runs_results_script(records: list[SubmissionRecord], metric: str, group_key: str | None = None) -> str:
    """Every run's results in one script (``templates/results-runs.sh.j2``): every metrics file
    whole, and the two rollout files of every benchmark cut down by the projection (one call of it
    for all runs; whole, base64, where the host has no ``python3``). Each run's records follow its
    run marker, by its place in ``records`` (copies of a run share its id)."""
    runs = [
        (
            str(i),
            {
                "jobs": record.benchmarks,
                "files": [
                    (
                        job.benchmark,
                        f"{job.job_dir}/{contract.ROLLOUTS_FILE}",
                        f"{job.job_dir}/{contract.MATERIALIZED_INPUTS_FILE}",
                    )
                    for job in record.benchmarks
                ],
            },
        )
        for i, record in enumerate(records)
    ]
    return render_template(
        "results-runs.sh.j2",
        # One word, single-quoted: a Python program whose $ and backquotes are literal by intent.
        projection=shlex.quote(projection_source()),
        metric=metric,
        group_key=group_key or "",
        runs=runs,
        batches=_batches(runs),
        max_bytes=untrusted.MAX_DOCUMENT_BYTES,
        too_large=TOO_LARGE,
        provenance_bytes=facts.PROVENANCE_MAX_BYTES,
        max_row_bytes=facts.MAX_ROW_BYTES,
    )


# One projection call's share: its arguments well below ARG_MAX (2 MiB on Linux, environment
# included), and its fallback a compound command bash parses without trouble.
BATCH_ARGUMENT_BYTES = 256 * 1024
BATCH_RUNS = 200


def _batches(runs: list[tuple[str, dict[str, Any]]]) -> list[list[tuple[str, dict[str, Any]]]]:
    """The runs in order, cut into batches of at most ``BATCH_RUNS`` runs and
    ``BATCH_ARGUMENT_BYTES`` of file arguments (a run is never split)."""
    batches: list[list[tuple[str, dict[str, Any]]]] = []
    size = 0
    for run in runs:
        need = sum(len(word) + 1 for files in run[1]["files"] for word in files) + 32
        if not batches or len(batches[-1]) >= BATCH_RUNS or size + need > BATCH_ARGUMENT_BYTES:
            batches.append([])
            size = 0
        batches[-1].append(run)
        size += need
    return batches


def projection_source() -> str:
    """What the host's ``python3 -c`` runs: the rollout projection with what it imports, one
    program that imports nothing from the directory it runs in (``shipping.inline``)."""
    return shipping.inline(Program.PROJECTION)


@dataclass
class _Found:
    documents: list[Any] = field(default_factory=list)  # every readable metrics file, parsed
    files: list[str] = field(default_factory=list)
    unreadable_file: str | None = None  # one line: the metrics file and why it cannot be read
    rollout_lines: list[str] | None = None  # None: there is no rollouts file
    expected_lines: list[str] | None = None  # None: gym wrote no list of expected pairs
    metric_names: list[str] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)


def parse_results_output(out: str, benchmarks: list[str]) -> dict[str, _Found]:
    found = {b: _Found() for b in benchmarks}
    sep = contract.FIELD_SEPARATOR
    for line in out.splitlines():
        if line.startswith(MARKER):
            bench, _n, path, payload = (line[len(MARKER) :].split(sep) + [""] * 4)[:4]
            if bench in found and path and payload:
                _add_metrics_file(found[bench], path, payload)
        elif line.startswith(contract.PROVENANCE_MARKER):
            bench, _, payload = line[len(contract.PROVENANCE_MARKER) :].partition(sep)
            if bench in found:
                found[bench].provenance = _provenance(payload)
        elif line.startswith(contract.ROLLOUTS_MARKER):
            bench, part, encoding, names, payload = (line[len(contract.ROLLOUTS_MARKER) :].split(sep) + [""] * 5)[:5]
            if bench not in found:
                continue
            lines = _decoded_lines(encoding, payload)
            if part == contract.ROLLOUTS_PART:
                found[bench].rollout_lines = lines
                found[bench].metric_names = [n for n in names.split(",") if n]
            elif part == contract.EXPECTED_PART:
                found[bench].expected_lines = lines
    return found


def _provenance(payload: str) -> dict[str, str]:
    try:
        data = base64.b64decode(payload[: facts.PROVENANCE_MAX_BYTES * 2])
    except ValueError:  # damaged in transit: nothing known, never a guess
        return {}
    text = data.decode("utf-8", errors="replace")
    if len(data) >= facts.PROVENANCE_MAX_BYTES:
        text = text.partition("\n")[2]  # the file's tail: its first line may be cut
    return facts.parse_provenance(text)


def _add_metrics_file(found: _Found, path: str, payload: str) -> None:
    """gym's aggregate metrics (an object, or a list of them), read bounded: anything else makes
    the file unreadable, said in one line."""
    try:
        if payload == TOO_LARGE:
            raise untrusted.Unreadable(f"{path}: larger than {untrusted.MAX_DOCUMENT_BYTES} bytes")
        data = base64.b64decode(payload)
        if len(data) > untrusted.MAX_DOCUMENT_BYTES:
            raise untrusted.Unreadable(f"{path}: larger than {untrusted.MAX_DOCUMENT_BYTES} bytes")
        metrics = untrusted.loads(data, path)
        if not isinstance(metrics, (dict, list)):
            raise untrusted.Unreadable(f"{path}: a JSON {untrusted.json_kind(metrics)} where metrics were expected")
    except untrusted.Unreadable as exc:
        found.unreadable_file = str(exc)
        return
    except ValueError:  # base64 damaged in transit
        found.unreadable_file = f"{path}: damaged in transit"
        return
    found.documents.append(metrics)
    found.files.append(path)


def _decoded_lines(encoding: str, payload: str) -> list[str]:
    """The file's lines as the reader splits them (at newlines only: a JSON row may hold U+2028)."""
    try:
        data = base64.b64decode(payload)
        if encoding == contract.ENCODING_PROJECTED:
            data = zlib.decompress(data)
    except (ValueError, zlib.error):
        return ["!"]  # damaged in transit: one unreadable line, never a silent empty file
    return data.decode("utf-8", errors="replace").split("\n")


# -- deciding what the files say ---------------------------------------------------------------------


def collect_results(
    records: list[SubmissionRecord],
    statuses: list[list[JobStatus]],
    conn: Connection,
    metric: str = DEFAULT_METRIC,
    group_key: str | None = None,
) -> list[list[BenchmarkResult]]:
    """Every run's benchmarks' results (each run's statuses given), from one script for all runs;
    with ``group_key``, each task's group of related tasks too."""
    out = conn.run_script(runs_results_script(records, metric, group_key)).stdout
    parts = split_by_run(out, [str(i) for i in range(len(records))])
    return [
        _results_of(record, run_statuses, parts[str(i)], metric, group_key)
        for i, (record, run_statuses) in enumerate(zip(records, statuses))
    ]


def _results_of(
    record: SubmissionRecord, statuses: list[JobStatus], out: str, metric: str, group_key: str | None = None
) -> list[BenchmarkResult]:
    names = [b.benchmark for b in record.benchmarks]
    found = parse_results_output(out, names)
    by_name = {s.benchmark: s for s in statuses}
    return [benchmark_result(name, by_name.get(name), found[name], metric, group_key) for name in names]


def benchmark_result(
    name: str, status: JobStatus | None, found: _Found, metric: str, group_key: str | None = None
) -> BenchmarkResult:
    """One benchmark's result from its job's state and its files, decided on the exact rows."""
    state = status.state if status is not None else Status.UNKNOWN
    rollouts = parse_rollouts(found.rollout_lines or [], metric, group_key)
    expected, expected_problem = _expected_pairs(found.expected_lines)
    check = completeness(expected, rollouts)
    metrics = facts.benchmark_metrics(found.documents)
    if state in (Status.SUCCEEDED, Status.INCOMPLETE):
        # The exact count decides; status's scan on the cluster only approximates it.
        state = Status.INCOMPLETE if check.complete is False else Status.SUCCEEDED
    means = per_task_means(rollouts, only=expected)
    counted = rollouts.written if expected is None else rollouts.written & expected
    unscoreable = [Unscoreable(t, r, why) for (t, r), why in sorted(rollouts.no_score.items()) if (t, r) in counted]
    result = BenchmarkResult(
        benchmark=name,
        state=state,
        samples=check.written - len(check.extra),
        expected_samples=check.expected,
        missing=list(check.missing),
        duplicates=check.duplicates,
        extra_samples=len(check.extra),
        unreadable_lines=rollouts.unreadable,
        metric=metric,
        value=math.fsum(means.values()) / len(means) if means else None,
        scored_tasks=len(means),
        written_tasks=len({task for task, _ in counted}),
        metrics=metrics.values,
        key_metrics=list(metrics.key_names),
        files=found.files,
        usage=status.usage if status is not None else NO_USAGE,
        task_means=means,
        spread=repeat_spread(rollouts, only=expected),
        task_groups=dict(rollouts.groups),
        metric_names=found.metric_names,
        unscoreable=unscoreable,
        inputs_digest=facts.inputs_digest(found.expected_lines or []),
        results_fingerprint=facts.results_fingerprint(rollouts.rewards),
        provenance=found.provenance,
    )
    detail = status.detail if status is not None else ""
    result.complete, result.completeness_reason = _completeness(result, found, check, expected_problem, detail)
    result.note = _note(result, found, check, rollouts, expected_problem)
    return result


def _completeness(
    result: BenchmarkResult, found: _Found, check: Completeness, expected_problem: str | None, detail: str
) -> tuple[bool | None, str | None]:
    """(complete, why not): False for the first thing known to be missing; None when nothing is,
    but there is no readable list of what the driver meant to write."""
    if result.state == Status.INCOMPLETE:
        return False, f"the job is incomplete: {len(check.missing)} of {check.expected} samples missing"
    if result.state != Status.SUCCEEDED:
        return False, f"the job is {result.state}" + (f" ({untrusted.one_line(detail)})" if detail else "")
    if found.unreadable_file:
        return False, f"unreadable metrics file {found.unreadable_file}"
    if not found.files:
        return False, "the job wrote no aggregate metrics"
    if result.unscoreable:
        return False, f"{len(result.unscoreable)} row(s) without a usable {result.metric!r} score"
    if check.complete is None:
        return None, expected_problem or NO_EXPECTED_LIST
    return True, None


def _expected_pairs(lines: list[str] | None) -> tuple[frozenset[TaskRollout] | None, str | None]:
    if lines is None:
        return None, None
    try:
        return parse_expected(lines), None
    except untrusted.Unreadable as exc:
        return None, f"{contract.MATERIALIZED_INPUTS_FILE} cannot be trusted ({exc})"


def _note(
    result: BenchmarkResult, found: _Found, check: Completeness, rollouts: RolloutSet, expected_problem: str | None
) -> str | None:
    """Why the numbers are partial or not to be trusted, most important first; None when they are."""
    parts = []
    state = result.state
    if state == Status.INCOMPLETE:
        parts.append(f"incomplete: {len(check.missing)} of {check.expected} samples missing")
    elif state != Status.SUCCEEDED:
        parts.append(f"partial: the job {state}; {result.samples_text()} samples on disk")
    if found.unreadable_file:
        parts.append(f"unreadable metrics file {found.unreadable_file}")
    elif not found.files:
        parts.append("the job wrote no aggregate metrics" if state == Status.SUCCEEDED else "no aggregate metrics")
    if expected_problem or (check.expected is None and found.rollout_lines is not None):
        parts.append(f"completeness unknown: {expected_problem or NO_EXPECTED_LIST}")
    if rollouts.unreadable:
        parts.append(_unreadable_rows(rollouts))
    if result.unscoreable:
        parts.append(
            f"partial value: {len(result.unscoreable)} row(s) without a usable {result.metric!r} score left out "
            f"(scored {result.scored_tasks} of {result.written_tasks} task(s))"
        )
    if check.duplicates:
        parts.append(f"{check.duplicates} duplicate row(s) counted once")
    if check.extra:
        parts.append(f"{len(check.extra)} unexpected sample(s) left out")
    return "; ".join(parts) or None


def _unreadable_rows(rollouts: RolloutSet) -> str:
    """``3 unreadable row(s) (line 2, 7, 9; line 7 over 64 MiB, refused unread)``."""
    more = ", ..." if rollouts.unreadable > len(rollouts.unreadable_lines) else ""
    text = f"{rollouts.unreadable} unreadable row(s) (line {', '.join(map(str, rollouts.unreadable_lines))}{more}"
    if rollouts.oversized:
        big = ", ".join(map(str, rollouts.oversized_lines)) + (
            ", ..." if rollouts.oversized > len(rollouts.oversized_lines) else ""
        )
        text += f"; line {big} over {MAX_ROW_BYTES // 2**20} MiB, refused unread"
    return text + ")"


def require_metric(runs: list[RunResults], metric: str) -> None:
    """The metric is a score in some row of some run, or the user made a typo: say what there is."""
    results = [r for run in runs for r in run.benchmarks]
    if any(r.scored_tasks for r in results) or not any(r.metric_names for r in results):
        return
    names = sorted({n for r in results for n in r.metric_names})
    raise UserError(
        f"no rollout carries a numeric {metric!r}; the rows have: {', '.join(names)}; choose one with --metric NAME"
    )


def headline(metrics: dict[str, float], key_names: list[str] | None = None) -> list[tuple[str, float]]:
    """The few metrics worth a table column: gym's key metrics when it reports them."""
    key = {name: metrics[name] for name in key_names or () if name in metrics}
    pool = key or metrics
    chosen = [(k, v) for k, v in pool.items() if any(k.endswith(p) for p in PREFERRED)]
    return (chosen or list(pool.items()))[:4]


def results_json(runs: list[RunResults]) -> str:
    """One run's document, or ``{"runs": [...]}`` with one per run."""
    if len(runs) == 1:
        return json.dumps(runs[0].as_dict(), indent=2)
    return json.dumps({"runs": [run.as_dict() for run in runs]}, indent=2)


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def _json_number(value: float | None) -> float | None:
    """JSON has no NaN or infinity: those are null."""
    return value if value is not None and math.isfinite(value) else None
