"""``gym eval export``: the script that reruns a run's exports on its submit host, and its answer.

Each benchmark's job staged the stdlib exporters beside its results (``steps/exporters``); the
script runs them there with the host's ``python3`` — the same code, receipts and keys as in the job,
so an export done already is skipped unless forced. The credentials this shell holds are exported
at the top of the script, which travels on standard input: they never reach a file or a command line.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping

from nemo_gym.orchestration import contract, exporters
from nemo_gym.orchestration.plan import EXPORT_CREDENTIALS
from nemo_gym.orchestration.record import SubmissionRecord

MARKER = "__GYM_EXPORT:"  # <benchmark><sep><line of the exporters' output>, or NONE
NO_EXPORTS = "__none__"


def export_script(record: SubmissionRecord, to: list[str], force: bool, environ: Mapping[str, str]) -> str:
    lines = ["set -u"]
    credentials = sorted({var for names in EXPORT_CREDENTIALS.values() for var in names})
    lines += [f"export {var}={shlex.quote(environ[var])}" for var in credentials if environ.get(var)]
    options = [arg for name in to for arg in ("--to", name)] + (["--force"] if force else [])
    sep = contract.FIELD_SEPARATOR
    for job in record.benchmarks:
        runner = shlex.quote(f"{job.job_dir}/{exporters.RUNNER}")
        prefix = shlex.quote(f"{MARKER}{job.benchmark}{sep}")
        run = shlex.join(["python3", f"{job.job_dir}/{exporters.RUNNER}", job.job_dir, *options])
        lines.append(
            f"if [ -f {runner} ]; then {run} 2>&1 | sed 's/^/'{prefix}'/'; "
            f"else printf '%s%s\\n' {prefix} {NO_EXPORTS}; fi"
        )
    return "\n".join(lines) + "\n"


def read_export_output(out: str, record: SubmissionRecord) -> list[tuple[str, list[str], bool]]:
    """(benchmark, its exporters' lines, whether one failed) for each benchmark of the run."""
    found: dict[str, list[str]] = {job.benchmark: [] for job in record.benchmarks}
    for line in out.splitlines():
        if line.startswith(MARKER) and contract.FIELD_SEPARATOR in line:
            bench, text = line[len(MARKER) :].split(contract.FIELD_SEPARATOR, 1)
            if bench in found:
                found[bench].append(text)
    results = []
    for bench, lines in found.items():
        if lines == [NO_EXPORTS] or not lines:
            results.append((bench, ["no exports are configured for this benchmark (job.export, or its own export)"], False))
        else:
            results.append((bench, lines, any("FAILED" in text for text in lines)))
    return results
