"""``gym eval info``: everything about a run's benchmarks in one place, and what ``gym eval
resubmit`` would do for each."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from nemo_gym.orchestration.cli.common import (
    add_json_flag,
    add_max_attempts,
    add_run_selector,
    after_run,
    max_attempts,
    run_prefix,
    selected,
)
from nemo_gym.orchestration.display import echo, terminal

if TYPE_CHECKING:
    from nemo_gym.orchestration.library import AttemptInfo, BenchmarkInfo, RunInfo


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "info", help="everything about a run's benchmarks: attempts, logs, samples, exports, what resubmit would do"
    )
    add_run_selector(p)
    p.add_argument("benchmarks", nargs="*", metavar="BENCHMARK", help="only these benchmarks (default: all)")
    add_max_attempts(p)
    add_json_flag(p, "everything shown here")
    p.set_defaults(handler=run_info)


def run_info(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import info, info_json

    selection = selected(args)
    runs = info(selection.records, after_run(args, args.benchmarks), max_attempts=max_attempts(args))
    echo(info_json(runs) if args.json else info_text(runs, run_prefix(selection)))
    return 0


def info_text(runs: list[RunInfo], prefixes: list[str] | None = None) -> str:
    """Each run's benchmarks, one block each. Every label read back is escaped on its own, so that
    a line break in a name or a detail cannot make a line of its own."""
    lines: list[str] = []
    for run, prefix in zip(runs, prefixes or ["" for _ in runs]):
        lines.append(f"{terminal(prefix)}Run {terminal(run.record.gym_job_id)}  {terminal(run.record.run_dir)}")
        for bench in run.benchmarks:
            lines += benchmark_lines(bench)
    return "\n".join(lines)


def benchmark_lines(bench: BenchmarkInfo) -> list[str]:
    job = bench.status
    lines = [
        f"  {terminal(job.benchmark)}: {terminal(job.state)} ({terminal(job.detail)})",
        f"    job dir:  {terminal(job.job_dir)}",
        f"    attempts: {len(bench.attempts)}",
    ]
    for n, attempt in enumerate(bench.attempts, 1):
        lines += attempt_lines(n, attempt)
    lines.append(f"    samples:  {samples_text(bench)}")
    lines.append(f"    exports:  {exports_text(job.exports)}")
    lines += made_from_lines(bench)
    lines.append(f"    resubmit would: {terminal(bench.plan.text)}")
    return lines


def attempt_lines(n: int, info: AttemptInfo) -> list[str]:
    a = info.attempt
    cause = f" [{terminal(a.cause)}]" if a.cause else ""
    spent = f"{a.gpu_hours:.2f} GPU-hours" if a.gpu_hours is not None else "GPU-hours unknown"
    lines = [
        f"      {n}. job {terminal(a.job_id)}: {terminal(a.state)}{cause}, {terminal(a.detail)}",
        f"         {_when(a.started)} -> {_when(a.ended)}, {spent}",
    ]
    if a.verdict:
        lines.append(f"         chain: {terminal(a.verdict)}")
    lines += [
        f"         job log:    {terminal(info.logs.job_log)}",
        f"         driver log: {terminal(info.logs.driver_log)}",
        f"         step logs:  {', '.join(terminal(p) for p in info.logs.step_logs)}",
    ]
    return lines


def made_from_lines(bench: BenchmarkInfo) -> list[str]:
    """The versions the job saw, and the two digests (12 hex digits; --json has them whole)."""
    made = bench.made_from
    versions = ", ".join(f"{terminal(k)} {terminal(v)}" for k, v in sorted(made.versions.items()))
    return [
        f"    ran:      {versions or 'not recorded'}",
        f"    inputs:   sha256 {made.inputs_digest[:12] if made.inputs_digest else '- (no materialized inputs)'}",
        f"    results:  fingerprint {made.results_fingerprint[:12] if made.results_fingerprint else '- (no scored rows)'}",
    ]


def _when(epoch: float | None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)) if epoch is not None else "?"


def samples_text(bench: BenchmarkInfo) -> str:
    from nemo_gym.orchestration.library import pairs_text

    check = bench.samples
    if check is None:
        return "not counted (no list of expected samples, or a job still runs)"
    text = f"{check.done}/{check.expected} written"
    if check.duplicates:
        text += f", {check.duplicates} duplicate row(s) counted once"
    if check.missing:
        text += f"; missing: {pairs_text(check.first_missing, check.missing)}"
    return text


def exports_text(exports: dict[str, dict]) -> str:
    if not exports:
        return "none"
    shown = []
    for name, receipt in exports.items():
        note = receipt.get("backend_run_id") or receipt.get("detail") or ""
        shown.append(f"{terminal(name)} {terminal(receipt.get('state'))}" + (f" ({terminal(note)})" if note else ""))
    return "; ".join(shown)
