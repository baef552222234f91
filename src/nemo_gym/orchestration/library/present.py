"""What the command line shows of the use cases' answers in words no single owner spells: where a
usage figure comes from, and what a submission will cost. (The usage figures' and the runs' own
words, the library exports from their owners, ``usage``, ``sweep`` and ``record``.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.estimate import estimate_lines

if TYPE_CHECKING:
    from nemo_gym.orchestration.estimate import RunEstimate
    from nemo_gym.orchestration.usage import Usage

# The usage figures' words are imported where they are shown: a submission's estimate without an
# earlier run to go by (every first one) shows none.


def usage_source_text(usage: Usage, executor: str) -> str:
    """Where a usage figure comes from, in words: the accounts are those of the run's backend
    (``executor``), which says whose they are."""
    from nemo_gym.orchestration.usage import SOURCE_ACCOUNTING, SOURCE_JOB_RECORD

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
        lines = estimate_lines(only, _wall_text)
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


def _wall_text(seconds: float) -> str:
    from nemo_gym.orchestration.usage import SOURCE_NONE, Usage, wall_text

    return wall_text(Usage(seconds, None, None, SOURCE_NONE))
