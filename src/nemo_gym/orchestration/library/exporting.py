"""Running (or rerunning) the exports of every run named, from here, on its submit host."""

from __future__ import annotations

import os
from dataclasses import dataclass

from nemo_gym.orchestration.connection import Connect, connect
from nemo_gym.orchestration.export_runs import export_script, read_export_output
from nemo_gym.orchestration.library.hosts import each_over_its_host
from nemo_gym.orchestration.record import SubmissionRecord, indexed_run


@dataclass(frozen=True)
class ExportResult:
    """What ``gym eval export`` did for one benchmark: the exporters' own lines, and whether any failed."""

    benchmark: str
    lines: list[str]
    failed: bool


def export(
    records: list[SubmissionRecord],
    to: list[str] | None = None,
    force: bool = False,
    *,
    trusted: list[str] | None = None,
    connect: Connect = connect,
) -> list[list[ExportResult]]:
    """Each run's exports (per run, per benchmark), run (or rerun) with this package's exporters (shipped in the script:
    never the copy staged in the run directory) against each job directory's data, over one
    connection per host; credentials from this shell's environment travel in the script, never in a
    file, and go only to the destinations the local index recorded for the run, or ``trusted`` names."""
    scripts = [_export_script(record, to or [], force, trusted or []) for record in records]
    return each_over_its_host(
        records, connect, lambda conn, i: _exported(records[i], conn.run_script(scripts[i]).stdout)
    )


def _export_script(record: SubmissionRecord, to: list[str], force: bool, trusted: list[str]) -> str:
    own = indexed_run(record.gym_job_id)
    chosen = {job.benchmark: job.export_to for job in own.benchmarks} if own else {}
    return export_script(record, to, force, os.environ, chosen, trusted)


def _exported(record: SubmissionRecord, out: str) -> list[ExportResult]:
    return [ExportResult(bench, lines, failed) for bench, lines, failed in read_export_output(out, record, os.environ)]
