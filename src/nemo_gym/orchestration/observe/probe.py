"""The status probe: its script (a template; every run named in one script) and running it over a connection."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from nemo_gym.orchestration import contract, facts
from nemo_gym.orchestration.backends import Backend, backend_named
from nemo_gym.orchestration.connection import Connection
from nemo_gym.orchestration.facts import ROLLOUT_INDEX_KEY, TASK_INDEX_KEY
from nemo_gym.orchestration.observe.folding import statuses_from
from nemo_gym.orchestration.observe.reading import parse_probe
from nemo_gym.orchestration.observe.status import (
    CANCELLED_BY_USER_KEY,
    CAUSE_KEY,
    JOB_END_KEY,
    MISSING_NAMED,
    JobStatus,
    SampleCheck,
)
from nemo_gym.orchestration.record import SubmissionRecord
from nemo_gym.orchestration.render import backend_context, render_template

# Bytes at each end of a line where the sample scan looks for the indices.
SCAN_WINDOW = 4096


def _scan_constants(missing_named: int = MISSING_NAMED) -> dict[str, object]:
    """What the sample scan (templates/probe-samples.sh.j2) is given besides the contract."""
    return {
        "missing_named": missing_named,
        "max_row": facts.MAX_ROW_BYTES,
        "window": SCAN_WINDOW,
        "task_key": TASK_INDEX_KEY,
        "rollout_key": ROLLOUT_INDEX_KEY,
    }


def check_samples_shell() -> str:
    """The probe's ``gym_check_samples B DIR`` function."""
    return render_template("probe-samples.sh.j2", **_scan_constants())


def missing_inputs_shell() -> str:
    """``gym_check_samples`` and ``gym_missing_inputs DIR OUT`` (templates/probe-samples.sh.j2),
    which reads a row as the scan does: it writes to the file OUT the lines of DIR's materialized
    inputs whose (task, rollout) pair is expected but not written (each verbatim, in the file's
    order, each pair's first line only; all of them when there is no rollouts file) and prints
    their number. It returns 1, printing nothing and leaving OUT untouched, when the expected list
    is missing or untrusted (a bad line, as ``facts.expected_pairs`` says). The probe does not
    carry it."""
    return render_template("probe-samples.sh.j2", **_scan_constants(), missing_inputs=True)


def probe_script(record: SubmissionRecord, backend: Backend, checked: frozenset[str] = frozenset()) -> str:
    """Per benchmark: its rollouts and resume chain, per job of the chain (the last few) the job's
    own state file and what the scheduler says of it, the times its jobs ran, and once its latest
    job has ended, its samples against the expected ones (unless ``checked`` names it: the count
    of an ended job does not change, so ``--watch`` makes it once). It calls ``probe_functions``'
    functions, which ``runs_probe_script`` puts before it."""
    probed = [
        {
            "benchmark": job.benchmark,
            "job_dir": job.job_dir,
            "job_id": job.job_id or "",  # a lane's job: its chain file names the job it was fed as
            "check": 0 if job.benchmark in checked else 1,
        }
        for job in record.units
        if job.queued
    ]
    merged = [
        {"benchmark": bench.benchmark, "job_dir": bench.job_dir, "check": 0 if bench.benchmark in checked else 1}
        for bench in record.benchmarks
        if bench.shards and bench.queued
    ]
    return render_template(
        "probe.sh.j2",
        **backend_context(backend),
        run_dir=record.run_dir,
        probed=probed,
        merged=merged,
        shared_dir=record.shared_deployment_dir,
    )


def probe_functions(backend: Backend, missing_named: int = MISSING_NAMED) -> str:
    """The functions a run's probe calls (``templates/probe-functions.sh.j2``), with its backend's
    ``describe_job``; a check names the first ``missing_named`` missing pairs."""
    return render_template(
        "probe-functions.sh.j2",
        **backend_context(backend),
        job_end_key=JOB_END_KEY,
        cancelled_key=CANCELLED_BY_USER_KEY,
        cause_key=CAUSE_KEY,
        **_scan_constants(missing_named),
    )


def probe_runs(
    records: list[SubmissionRecord],
    conn: Connection | None,
    known: Sequence[Mapping[str, SampleCheck]] | None = None,
    missing_named: int = MISSING_NAMED,
) -> list[list[JobStatus]]:
    """The statuses of every job of several runs on one host (a sweep's, or one run's) in one round
    trip over ``conn``: each run's probe in a subshell of its own, its output headed by the run's
    index. ``conn`` may be None when no run was queued: a run nobody could queue needs no cluster to
    be told. ``known``, per run: sample counts of benchmarks that had ended at an earlier probe, not
    made again. ``missing_named``: how many missing pairs each sample check names."""
    backends = [backend_named(r.executor) for r in records]
    checks = list(known) if known is not None else [{} for _ in records]
    queued = {i for i, r in enumerate(records) if was_queued(r)}
    outputs: dict[int, str] = {}
    if queued:
        if conn is None:
            raise ValueError("a queued run is probed over a connection")
        probed = [records[i] for i in sorted(queued)]
        scripts = [(i, probe_script(records[i], backends[i], frozenset(checks[i]))) for i in sorted(queued)]
        outputs = _outputs_by_run(conn.run_script(runs_probe_script(probed, scripts, missing_named)).stdout)
    return [
        statuses_from(r, parse_probe(outputs.get(i, ""), b), b, checks[i]) if i in queued else statuses_from(r, None, b)
        for i, (r, b) in enumerate(zip(records, backends))
    ]


def runs_probe_script(
    records: list[SubmissionRecord], scripts: list[tuple[int, str]], missing_named: int = MISSING_NAMED
) -> str:
    """Several runs' probes as one script (``templates/probe-runs.sh.j2``): the probe's functions
    once and the scheduler asked once for all of them where their backend can (one backend for all:
    a sweep's runs share one); runs of several backends each get their own functions."""
    backends = [backend_named(record.executor) for record in records]
    if len({backend.name for backend in backends}) == 1:
        functions = probe_functions(backends[0], missing_named)
        return render_template(
            "probe-runs.sh.j2", functions=functions, snapshot=snapshot_script(backends[0], records), runs=scripts
        )
    scripts = [
        (i, "\n".join([probe_functions(b, missing_named), snapshot_script(b, [record]), script]))
        for (i, script), b, record in zip(scripts, backends, records)
    ]
    return render_template("probe-runs.sh.j2", functions="", snapshot="", runs=scripts)


def snapshot_script(backend: Backend, records: list[SubmissionRecord]) -> str:
    """What the scheduler says of every job ``records`` name, asked once (``templates/probe-snapshot.sh.j2``):
    given what their jobs were queued under, each once, and their ids (resume chains whole)."""
    units = [job for record in records for job in record.units if job.queued]
    queued = list({json.dumps(job.queued_as, sort_keys=True): job.queued_as for job in units}.values())
    jobs = [(job.job_id or "", f"{job.job_dir}/{contract.CHAIN_FILE}") for job in units]
    return render_template("probe-snapshot.sh.j2", **backend_context(backend), queued=queued, jobs=jobs)


def was_queued(record: SubmissionRecord) -> bool:
    """Whether any job of the run was queued (else nothing about it is asked of its host)."""
    return any(b.queued for b in record.units)


def _outputs_by_run(out: str) -> dict[int, str]:
    outputs: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in out.splitlines():
        if line.startswith(contract.PROBE_RUN_MARKER) and contract.is_count(line[len(contract.PROBE_RUN_MARKER) :]):
            current = outputs.setdefault(int(line[len(contract.PROBE_RUN_MARKER) :]), [])
        elif current is not None:
            current.append(line)
    return {i: "\n".join(lines) for i, lines in outputs.items()}
