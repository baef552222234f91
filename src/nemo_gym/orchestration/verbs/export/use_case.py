"""Running (or rerunning) the exports of every run named, from here, on its submit host."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Any

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.connection import Connect, Connection, connect
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.exporters.spec import EXPORTERS, destinations, make_spec, settings_problems
from nemo_gym.orchestration.library.hosts import each_over_its_host, over_their_hosts
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord, indexed_run
from nemo_gym.orchestration.verbs.export.script import export_script, read_export_output


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
    settings: dict[str, dict[str, Any]] | None = None,
    connect: Connect = connect,
) -> list[list[ExportResult]]:
    """Each run's exports (per run, per benchmark), run (or rerun) with this package's exporters (shipped in the script:
    never the copy staged in the run directory) against each job directory's data, over one
    connection per host; credentials from this shell's environment travel in the script, never in a
    file, and go only to the destinations the local index recorded for the run, or ``trusted`` names.

    ``settings``: exporter -> its settings (a tracking URI, a project, a directory), to export
    there whatever the runs were submitted with (submitted without ``job.export``, or to the wrong
    place): each benchmark's spec is then made here, from its record and its resolved config, and
    the destinations named are the user's choice (trusted)."""
    to = list(to or [])
    unknown = [name for name in [*to, *(settings or {})] if name not in EXPORTERS]
    if unknown:
        raise UserError(f"--to {unknown[0]}: no such exporter; gym eval export knows {', '.join(EXPORTERS)}")
    if not settings:
        scripts = [_export_script(record, to, force, trusted or []) for record in records]
        return each_over_its_host(
            records, connect, lambda conn, i: _exported(records[i], conn.run_script(scripts[i]).stdout)
        )
    problems = settings_problems(settings)
    if problems:
        raise UserError([f"gym eval export: {problem}" for problem in problems])
    chosen_here = [*(trusted or []), *destinations(settings).values()]

    def over(conn: Connection, indices: list[int]) -> list[list[ExportResult]]:
        runs = [records[i] for i in indices]
        configs = _resolved_configs(conn, runs)
        answers = []
        for record, config in zip(runs, configs):
            specs = {job.benchmark: _spec_here(record, job, config, settings) for job in record.benchmarks}
            script = export_script(record, to or list(settings), force, os.environ, {}, chosen_here, specs)
            answers.append(_exported(record, conn.run_script(script).stdout))
        return answers

    return over_their_hosts(records, connect, over)


def _export_script(record: SubmissionRecord, to: list[str], force: bool, trusted: list[str]) -> str:
    own = indexed_run(record.gym_job_id)
    chosen = {job.benchmark: job.export_to for job in own.benchmarks} if own else {}
    return export_script(record, to, force, os.environ, chosen, trusted)


# The resolved config is read back from the run directory (untrusted, bounded): its params only.
_CONFIG_CAP = 1 << 20


def _resolved_configs(conn: Connection, records: list[SubmissionRecord]) -> list[dict[str, Any]]:
    """Each run's resolved config as its directory keeps it ({} when it cannot be read)."""
    import base64

    import yaml

    from nemo_gym.orchestration.submission import split_by_run

    lines = []
    for i, record in enumerate(records):
        path = shlex.quote(f"{record.run_dir}/{contract.RESOLVED_CONFIG_FILE}")
        # Each run's part after its marker, by its place (copies of a run share its id).
        lines += [f"printf '%s\\n' {shlex.quote(contract.RUN_MARKER + str(i))}"]
        lines += [f"head -c {_CONFIG_CAP} {path} 2>/dev/null | base64 -w0; echo"]
    out = conn.run_script("\n".join(lines) + "\ntrue\n").stdout
    parts = split_by_run(out, [str(i) for i in range(len(records))])
    configs = []
    for i in range(len(records)):
        try:
            loaded = yaml.safe_load(base64.b64decode(parts[str(i)].strip() or b"", validate=True))
        except (ValueError, yaml.YAMLError):
            loaded = None
        configs.append(loaded if isinstance(loaded, dict) else {})
    return configs


def _spec_here(
    record: SubmissionRecord, job: BenchmarkJob, config: dict[str, Any], settings: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    """A benchmark's export spec made here, as a job would have had it with these exporters."""
    job_config = config.get("job") if isinstance(config.get("job"), dict) else {}
    step = job_config.get("training_step") if isinstance(job_config, dict) else None
    gpus = job.gpus if job.gpus is not None else next((u.gpus for u in job.shards if u.gpus is not None), None)
    # A shared deployment's benchmarks are timed by its one job; a guest's by its host (counted there).
    usage_dir = f"../{contract.SHARED_DEPLOYMENT_DIR}" if record.deployment_host == record.gym_job_id else None
    return make_spec(
        record.gym_job_id,
        job.benchmark,
        record.model or "",
        record.model or "",
        config,
        settings,
        sweep_id=record.sweep_id,
        gpus=gpus,
        usage_dir=usage_dir,
        step=step if isinstance(step, int) and not isinstance(step, bool) else None,
    )


def _exported(record: SubmissionRecord, out: str) -> list[ExportResult]:
    return [ExportResult(bench, lines, failed) for bench, lines, failed in read_export_output(out, record, os.environ)]
