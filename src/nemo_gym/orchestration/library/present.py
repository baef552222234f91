"""What the command line needs to show the use cases' answers, from the modules that own each:
the text of usage figures, the labels of runs, the JSON documents."""

from __future__ import annotations

from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.estimate import RunEstimate, estimate_lines
from nemo_gym.orchestration.record import last_observed, values_label
from nemo_gym.orchestration.sweep import run_labels, runs_title, short_keys, short_values_label
from nemo_gym.orchestration.usage import SOURCE_ACCOUNTING, SOURCE_JOB_RECORD, SOURCE_NONE, Usage, hours_text, wall_text
from nemo_gym.orchestration.usage import total as total_usage

__all__ = [
    "SOURCE_NONE",
    "hours_text",
    "last_observed",
    "run_labels",
    "runs_title",
    "short_keys",
    "short_values_label",
    "total_usage",
    "usage_source_text",
    "values_label",
    "wall_text",
]


def usage_source_text(usage: Usage, executor: str) -> str:
    """Where a usage figure comes from, in words: the accounts are those of the run's backend
    (``executor``), which says whose they are."""
    accounts = backend_named(executor).accounting_text or "from the scheduler's accounting"
    return {
        SOURCE_ACCOUNTING: accounts,
        SOURCE_JOB_RECORD: "from the jobs' own start/end records x the GPUs each job was given",
    }.get(usage.source, f"{accounts} where it has the job, else the jobs' own records")


def estimate_text(estimates: list[RunEstimate] | tuple[RunEstimate, ...]) -> list[str]:
    """What a submission will cost, from the index's earlier runs: per benchmark of one run, or
    the total of a sweep's runs (with how many of its benchmarks have no estimate)."""
    if len(estimates) == 1:
        [only] = estimates
        lines = estimate_lines(only, lambda seconds: wall_text(Usage(seconds, None, None, SOURCE_NONE)))
        if only.gpu_hours is not None and len(only.benchmarks) > 1:
            lines.append(f"the run: ~{only.gpu_hours:.2f} GPU-hours")
        return lines
    known = [e.gpu_hours for e in estimates if e.gpu_hours is not None]
    unknown = sum(len(e.unknown) for e in estimates)
    total = sum(len(e.benchmarks) for e in estimates)
    if not known:
        return [f"no earlier runs in the local index to estimate the sweep's {total} benchmark job(s) from"]
    line = f"the sweep's {len(known)} run(s) with an estimate: ~{sum(known):.2f} GPU-hours"
    return [line + (f"; {unknown} of its {total} benchmark job(s) have none" if unknown else "")]
