"""Collect every benchmark's aggregate metrics of a run into one table, marking what is missing."""

from __future__ import annotations

import base64
import json
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.connection import Connection
from nemo_gym.orchestration.record import SubmissionRecord

MARKER = contract.RESULT_MARKER
# Metric names shown in the table, most telling first; the JSON has every metric.
PREFERRED = ("mean/reward", "pass@1/accuracy", "pass@1/f1", "mean_reward", "accuracy")


@dataclass
class BenchmarkResult:
    benchmark: str
    samples: int
    metrics: dict[str, float] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    missing: str | None = None  # why there are no (trustworthy) results
    complete: bool = False  # the job succeeded: its files are final, not what a killed driver left


def _script(record: SubmissionRecord) -> str:
    lines = []
    for job in record.benchmarks:
        d = shlex.quote(job.job_dir)
        b = shlex.quote(job.benchmark)
        lines.append(
            f"n=$(cat {d}/{contract.ROLLOUTS_FILE} 2>/dev/null | wc -l); "
            f"for f in {d}/{contract.AGGREGATE_METRICS_GLOB}; do [ -f \"$f\" ] || continue; "
            f"printf '%s%s\\x1f%s\\x1f%s\\x1f%s\\n' {shlex.quote(MARKER)} {b} \"$n\" \"$f\" \"$(base64 -w0 <\"$f\")\"; done; "
            f"printf '%s%s\\x1f%s\\x1f\\x1f\\n' {shlex.quote(MARKER)} {b} \"$n\""
        )
    return "\n".join(lines) + "\n"


def _numbers(data: Any, prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            out.update(_numbers(value, f"{prefix}{key}/" if isinstance(value, (dict, list)) else f"{prefix}{key}"))
    elif isinstance(data, list):
        for i, value in enumerate(data[:20]):
            out.update(_numbers(value, f"{prefix}{i}/"))
    elif isinstance(data, (int, float)) and not isinstance(data, bool):
        out[prefix.rstrip("/")] = float(data)
    return out


def collect_results(
    record: SubmissionRecord, states: dict[str, str], conn: Connection
) -> list[BenchmarkResult]:
    found: dict[str, BenchmarkResult] = {
        b.benchmark: BenchmarkResult(b.benchmark, 0) for b in record.benchmarks
    }
    out = conn.run_script(_script(record)).stdout
    for line in out.splitlines():
        if not line.startswith(MARKER):
            continue
        bench, n, path, payload = (line[len(MARKER) :].split("\x1f") + [""] * 4)[:4]
        result = found.get(bench)
        if result is None:
            continue
        result.samples = int(n.strip() or 0)
        if path and payload:
            try:
                result.metrics.update(_numbers(json.loads(base64.b64decode(payload))))
                result.files.append(path)
            except ValueError:
                result.missing = f"unreadable metrics file {path}"
    for job in record.benchmarks:
        result = found[job.benchmark]
        state = states.get(job.benchmark, "unknown")
        result.complete = state == "succeeded" and bool(result.files)
        if result.files and state != "succeeded":
            # A driver that died may have left partial files: never present them as results.
            result.missing = f"incomplete: the job {state}; {result.samples} rollout(s) on disk are partial"
        if not result.files and result.missing is None:
            result.missing = (
                f"no aggregate metrics yet (job {state})" if state != "succeeded" else "the job wrote no aggregate metrics"
            )
    return list(found.values())


def headline(metrics: dict[str, float]) -> list[tuple[str, float]]:
    """The few metrics worth a table column: gym's key metrics when it reports them."""
    key = {k.split("key_metrics/", 1)[1]: v for k, v in metrics.items() if "key_metrics/" in k}
    pool = key or metrics
    chosen = [(k, v) for k, v in pool.items() if any(k.endswith(p) for p in PREFERRED)]
    return (chosen or list(pool.items()))[:4]


def results_json(record: SubmissionRecord, results: list[BenchmarkResult]) -> str:
    return json.dumps({"run": record.gym_job_id, "benchmarks": [asdict(r) for r in results]}, indent=2)
