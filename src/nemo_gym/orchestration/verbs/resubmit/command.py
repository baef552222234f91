"""``gym eval resubmit``: finish what is unfinished, in place — per benchmark the plan (what
``gym eval info`` shows), then a new job only where the plan says, generating only what is
missing and never a scored sample again."""

from __future__ import annotations

import argparse
import json
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
    from nemo_gym.orchestration.library import BenchmarkResubmit, RunResubmit

# The version of --json's document: fields are only ever added.
RESUBMIT_SCHEMA = 1


def register(verbs: argparse._SubParsersAction) -> None:
    p = verbs.add_parser(
        "resubmit",
        help="finish a run in place: generate only its missing samples, re-queue what failed",
    )
    add_run_selector(p)
    p.add_argument("benchmarks", nargs="*", metavar="BENCHMARK", help="only these benchmarks (default: all)")
    add_max_attempts(p)
    p.add_argument("--dry-run", action="store_true", help="print the plan; queue nothing")
    add_json_flag(p, "the new submission's records")
    p.set_defaults(handler=run_resubmit)


def run_resubmit(args: argparse.Namespace) -> int:
    from nemo_gym.orchestration.library import resubmit

    selection = selected(args)
    runs = resubmit(
        selection.records, after_run(args, args.benchmarks), max_attempts=max_attempts(args), dry_run=args.dry_run
    )
    echo(resubmit_json(runs) if args.json else resubmit_text(runs, run_prefix(selection)))
    return 0 if all(run.ok for run in runs) else 1


def resubmit_text(runs: list[RunResubmit], prefixes: list[str] | None = None) -> str:
    """Per run, per benchmark: the plan, then what was queued for it (or why not)."""
    lines: list[str] = []
    for run, prefix in zip(runs, prefixes or ["" for _ in runs]):
        lines.append(f"{terminal(prefix)}Run {terminal(run.record.gym_job_id)}  {terminal(run.record.run_dir)}")
        for bench in run.benchmarks:
            lines += benchmark_lines(bench, run.dry_run)
        if run.dry_run and any(b.plan.remedy.acts for b in run.benchmarks):
            lines.append("  (dry run: nothing was queued)")
    return "\n".join(lines)


def benchmark_lines(bench: BenchmarkResubmit, dry_run: bool) -> list[str]:
    lines = [f"  {terminal(bench.benchmark)}: {terminal(bench.plan.text)}"]
    requeued = bench.requeued
    answer = bench.answer
    if requeued is None or answer is None:
        return lines
    if bench.refused:
        lines.append(f"    not queued: {terminal(bench.refused)}")
        return lines
    inputs = f", its inputs: {answer.inputs} row(s)" if answer.inputs is not None else ""
    lines.append(f"    -> job {terminal(bench.job_id)} queued as attempt {requeued.attempt}{inputs}")
    if answer.held:
        lines.append(f"    but it could not be released and waits held: release job {terminal(bench.job_id)} by hand")
    return lines


def resubmit_json(runs: list[RunResubmit]) -> str:
    return json.dumps({"schema": RESUBMIT_SCHEMA, "runs": [_run_document(run) for run in runs]}, indent=2)


def _run_document(run: RunResubmit) -> dict:
    return {
        "run": run.record.gym_job_id,
        "run_dir": run.record.run_dir,
        "dry_run": run.dry_run,
        "benchmarks": [_benchmark_document(b) for b in run.benchmarks],
    }


def _benchmark_document(bench: BenchmarkResubmit) -> dict:
    requeued = bench.requeued
    answer = bench.answer
    return {
        "benchmark": bench.benchmark,
        "state": bench.info.status.state,
        "remedy": bench.plan.remedy,
        "plan": bench.plan.text,
        "missing": [list(p) for p in bench.plan.missing],
        "attempt": requeued.attempt if requeued else None,
        "job_id": bench.job_id,
        "refused": bench.refused,
        "inputs": answer.inputs if answer else None,
        "held": answer.held if answer else False,
    }
