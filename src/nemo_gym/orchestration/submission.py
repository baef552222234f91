"""Stage runs on the submit host and queue their jobs, in one round trip.

One bash script, sent on standard input, for one run or every run of a sweep: it checks every
run's mount sources and that no run directory exists yet, unpacks every staged run directory, and
only then lets the backend queue the jobs, printing one marker line per job after a marker line
per run. So a sweep is queued whole or not at all when a check fails, and a run directory that
cannot be written leaves nothing behind. Each job's line is parsed on its own, so a failure never
shifts another benchmark's job id and a warning never becomes a job id. Each run's secrets are
exported only where its jobs are queued, so they reach its jobs through the scheduler's
environment and never touch a file.
"""

from __future__ import annotations

import base64
import gzip
import io
import posixpath
import re
import tarfile
from dataclasses import dataclass
from time import monotonic as clock
from time import sleep

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends import Backend, backend_named
from nemo_gym.orchestration.backends.base import QueueDemand
from nemo_gym.orchestration.connection import Connection
from nemo_gym.orchestration.errors import ConnectionLost, UserError
from nemo_gym.orchestration.feeding import Lanes, plan_lanes
from nemo_gym.orchestration.plan.model import JobPlan, RunPlan
from nemo_gym.orchestration.render import StagedFile, StagedRun, backend_context, lane_feeder_files, render_template

# After a lost connection, how long the submission script (which runs on: HUP ignored) is waited
# for to end before what it queued is read back, and how often its logs are read meanwhile.
SETTLE_SECONDS = 120
SETTLE_POLL_SECONDS = 2

EXIT_MISSING_MOUNTS = 3
EXIT_RUN_DIR_EXISTS = 4
EXIT_RUN_DIR_UNWRITABLE = 5


@dataclass(frozen=True)
class QueuedJob:
    """One benchmark's submission: its job id, or why it could not be queued."""

    benchmark: str
    job_id: str | None
    error: str | None
    fed_by: str | None = None  # queued later by the job of this benchmark (``run/benchmark``), in its lane


def _lane_feeder(run: RunToSubmit) -> dict[str, StagedFile]:
    """The lane feeder's tree, under the run directory, with its backend's node module."""
    files = lane_feeder_files(backend_named(run.plan.backend))
    return {f"{contract.LANE_FEEDER_DIR}/{rel}": staged for rel, staged in files.items()}


def _tarball(staged: StagedRun, more: dict[str, StagedFile]) -> str:
    """The staged files (and ``more``) as base64 of a tar.gz, the same bytes for the same files:
    the gzip header's time is 0 (tarfile's "w:gz" writes the clock's, so two renders a second apart
    differed)."""
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as compressed,
        tarfile.open(fileobj=compressed, mode="w") as tar,
    ):
        for rel, staged_file in sorted((staged.files | more).items()):
            data = staged_file.content.encode()
            info = tarfile.TarInfo(rel)
            info.size = len(data)
            info.mode = staged_file.mode
            tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buffer.getvalue()).decode()


@dataclass(frozen=True)
class RunToSubmit:
    """One run of a submission: its staged files and the secrets its jobs are given."""

    staged: StagedRun
    secrets: dict[str, str]

    @property
    def plan(self) -> RunPlan:
        return self.staged.plan


def submission_script(runs: list[RunToSubmit], packing: Packing | None = None) -> str:
    """Every run's checks, then every run's directory, then every run's jobs (see the module);
    in lanes, only each lane's first job is queued and every job is told the next of its lane."""
    packing = packing or Packing()
    lanes = packing.lanes
    plans = [run.plan for run in runs]
    secrets = [tuple(run.secrets.items()) for run in runs]
    units = submitted_units(plans)
    fed = {} if lanes is None else {units[j][1].job_dir: label(*units[b]) for j, b in lanes.fed_by().items()}
    links = [] if lanes is None else [(units[b][1].job_dir, units[n][1].job_dir) for b, n in lanes.next_of().items()]
    feeder = f"{plans[0].run_dir}/{contract.LANE_FEEDER_DIR}" if links else ""
    # One backend queues them all: the library refuses runs of several kinds before (library.prepare).
    backend = backend_named(plans[0].backend)
    return render_template(
        "submission.sh.j2",
        # Each distinct mount source once; the script stops before writing anything if one is missing.
        mount_sources=list(dict.fromkeys(pair for plan in plans for pair in plan.mount_sources)),
        absent_parents=_parents_deepest_first(plans),
        runs=[
            {
                "run_dir": run.plan.run_dir,
                "tarball": _tarball(run.staged, _lane_feeder(run) if i == 0 and links else {}),
            }
            for i, run in enumerate(runs)
        ],
        lane_links=links,
        lane_feeder=feeder,
        queue=backend.queue_request(plans, secrets, fed, packing.together),
        **backend_context(backend),
        exit_missing_mounts=EXIT_MISSING_MOUNTS,
        exit_run_dir_exists=EXIT_RUN_DIR_EXISTS,
        exit_run_dir_unwritable=EXIT_RUN_DIR_UNWRITABLE,
    )


def _parents_deepest_first(plans: list[RunPlan]) -> list[str]:
    """The directories above the run directories, deepest first: those that do not exist yet
    (``mkdir -p`` will make them) a refused submission removes again (those still empty), leaving
    nothing behind, not even an empty output directory."""
    parents = {parent for plan in plans for parent in _parents(plan.run_dir)}
    return sorted(parents, key=lambda d: (-d.count("/"), d))


def _parents(run_dir: str) -> list[str]:
    """``/a/b/run`` -> ``/a/b``, ``/a`` (not ``/``, nor a relative path's ``.``)."""
    found = []
    parent = posixpath.dirname(run_dir.rstrip("/"))
    while parent not in ("", "/", ".", "~") and parent not in found:
        found.append(parent)
        parent = posixpath.dirname(parent)
    return found


def split_by_run(stdout: str, run_ids: list[str]) -> dict[str, str]:
    """Each run's part of a several-run script's output (after its run marker lines)."""
    sections = marked_sections(stdout, contract.RUN_MARKER)
    return {run_id: sections.get(run_id, "") for run_id in run_ids}


def no_result(backend: Backend) -> str:
    return f"{backend.submit_command} produced no result for this benchmark"


def parse_submission_output(stdout: str, benchmarks: list[str], backend: Backend) -> list[QueuedJob]:
    """Each benchmark's marker line: ``<benchmark>:<status>:<output>``, the id the last word of the output."""
    job_id = re.compile(rf"^({backend.job_id_pattern})(;\S+)?$")
    seen: dict[str, QueuedJob] = {}
    for line in stdout.splitlines():
        if not line.startswith(contract.JOB_MARKER):
            continue
        bench, status, payload = (line[len(contract.JOB_MARKER) :].split(":", 2) + ["", ""])[:3]
        payload = payload.strip()
        tokens = payload.split()
        match = job_id.match(tokens[-1]) if tokens else None
        if status == contract.FED_STATUS:
            seen[bench] = QueuedJob(bench, None, None, payload)
        elif status == "0" and match:
            seen[bench] = QueuedJob(bench, match.group(1), None)
        elif status == "0":
            seen[bench] = QueuedJob(bench, None, payload or f"{backend.submit_command} exited 0 with no job id")
        else:
            seen[bench] = QueuedJob(bench, None, payload or f"{backend.submit_command} exited {status}")
    return [seen.get(b, QueuedJob(b, None, no_result(backend))) for b in benchmarks]


def _parse(plan: RunPlan, stdout: str) -> list[QueuedJob]:
    backend = backend_named(plan.backend)
    return per_benchmark(plan, parse_submission_output(stdout, [j.unit for j in plan.submitted_jobs], backend))


def stage_and_submit(conn: Connection, runs: list[RunToSubmit]) -> list[list[QueuedJob]]:
    """Stage and queue every run in one script (after the site's limits are asked, in one more);
    each run's jobs, in order. A failed check raises before anything was written or queued."""
    plans = [run.plan for run in runs]
    backend = backend_named(plans[0].backend)
    packing = fit_within_site_limits(conn, backend, queue_demands(plans), feedable=_one_environment(runs))
    result = conn.run_script(submission_script(runs, packing))
    out = result.stdout.splitlines()
    missing = [line[len(contract.MISSING_MARKER) :] for line in out if line.startswith(contract.MISSING_MARKER)]
    if missing:
        raise UserError([_missing_mount(m, plans) for m in missing])
    existing = [
        line[len(contract.RUN_DIR_EXISTS_MARKER) :] for line in out if line.startswith(contract.RUN_DIR_EXISTS_MARKER)
    ]
    if result.returncode == EXIT_RUN_DIR_EXISTS:
        raise UserError(f"{', '.join(existing)} exists already; nothing was submitted, retry to get a new run id")
    if result.returncode == EXIT_RUN_DIR_UNWRITABLE:
        detail = " ".join(result.stderr.split())[-300:]
        where = plans[0].run_dir if len(plans) == 1 else f"of {len(plans)} runs"
        raise UserError(f"could not write the run directory {where} ({detail}); nothing was submitted")
    parts = split_by_run(result.stdout, [plan.run_id for plan in plans])
    return answered_by_hosts(plans, [_parse(plan, parts[plan.run_id]) for plan in plans])


def answered_by_hosts(plans: list[RunPlan], answers: list[list[QueuedJob]]) -> list[list[QueuedJob]]:
    """Each run's jobs as queued; a run that queued nothing of its own (a sweep's guest of another
    run's shared deployment) has its host's shared job for every benchmark, or its host's refusal."""
    by_run = {plan.run_id: answer for plan, answer in zip(plans, answers)}
    out = []
    for plan, answer in zip(plans, answers):
        if plan.host is not None:
            host = by_run.get(plan.host[0]) or [QueuedJob("", None, f"its host run {plan.host[0]} was not submitted")]
            answer = [QueuedJob(job.benchmark, host[0].job_id, host[0].error, host[0].fed_by) for job in plan.jobs]
        out.append(answer)
    return out


def refuse_beyond_site_limits(conn: Connection, backend: Backend, demands: list[QueueDemand]) -> None:
    """Raise, naming the limit, when these jobs cannot all be queued within what the site lets
    the user queue (``backend``'s ``limits_request``/``limits_problems``)."""
    fit_within_site_limits(conn, backend, demands, feedable=False)


@dataclass(frozen=True)
class Packing:
    """How a submission's jobs are queued within the site's limits: in ``lanes`` (None: all at
    once), and at most ``together`` of one shape in one call (``Backend.most_queued_together``)."""

    lanes: Lanes | None = None
    together: int = 1


def fit_within_site_limits(conn: Connection, backend: Backend, demands: list[QueueDemand], feedable: bool) -> Packing:
    """No lanes when these jobs can all be queued at once within what the site lets the user
    queue (``backend``'s ``limits_request``/``limits_problems``); else, where the backend's jobs
    can queue each other and ``feedable``, the lanes that keep them within it (``feeding``), each
    job queued on its own; else raise, naming the limit."""
    script = site_limits_script(backend, demands) if demands else None
    if script is None:
        return Packing()
    try:
        answer = conn.run_script(script).stdout
    except ConnectionLost as lost:
        # Nothing was written or queued yet: a plain failure, not one to recover from.
        raise UserError(
            f"nothing was submitted: the connection was lost while asking the site's limits ({lost.problems[0]})"
        ) from None
    answers = marked_sections(answer, contract.LIMITS_MARKER)
    problems = backend.limits_problems(answers, demands)
    if not problems:
        return Packing(together=backend.most_queued_together(answers))
    if feedable and backend.feeds_lanes and len(demands) > 1:
        lanes = plan_lanes(len(demands), lambda held: not backend.limits_problems(answers, [demands[i] for i in held]))
        if lanes is not None:
            return Packing(lanes)
    raise UserError(problems)


def _one_environment(runs: list[RunToSubmit]) -> bool:
    """Whether every run exports the same secrets: a job queued by another job gets that job's
    environment, so lanes never mix runs whose jobs are given different ones."""
    return len({tuple(sorted(run.secrets.items())) for run in runs}) <= 1


def submitted_units(plans: list[RunPlan]) -> list[tuple[RunPlan, JobPlan]]:
    """Every job the runs queue, in the submission's order (the order lanes are dealt in)."""
    return [(plan, job) for plan in plans for job in plan.submitted_jobs]


def label(plan: RunPlan, job: JobPlan) -> str:
    """``run/benchmark``: a job as a user names it."""
    return f"{plan.run_id}/{job.unit}"


def queue_demands(plans: list[RunPlan]) -> list[QueueDemand]:
    """Every job the runs queue, as the site's limits weigh it."""
    backend = backend_named(plans[0].backend)
    return [QueueDemand(plan.run_id, backend.queue_facts(job)) for plan, job in submitted_units(plans)]


def marked_sections(stdout: str, marker: str) -> dict[str, str]:
    """Each ``<marker><name>`` line's name -> the text up to the next such line."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in stdout.splitlines():
        if line.startswith(marker):
            current = sections.setdefault(line[len(marker) :].strip(), [])
        elif current is not None:
            current.append(line)
    return {name: "\n".join(lines) for name, lines in sections.items()}


def _missing_mount(marker: str, plans: list[RunPlan]) -> str:
    """``driver.mounts: source '/x' does not exist ...``, naming the combinations when not all have it."""
    label, src = marker.split(":", 1)
    having = [plan for plan in plans if (label, src) in plan.mount_sources]
    problem = f"{label}.mounts: source {src!r} does not exist on the submit host; create it or fix the mount"
    if len(having) == len(plans):
        return problem
    return f"{problem} (in run(s) {', '.join(plan.run_id for plan in having)})"


def per_benchmark(plan: RunPlan, results: list[QueuedJob]) -> list[QueuedJob]:
    """A shared deployment is one job: every benchmark gets its id (or its refusal)."""
    if plan.shared is None:
        return results
    if plan.host is not None:
        return []  # queued by its host's shared job (answered_by_hosts)
    [shared] = results
    return [QueuedJob(job.benchmark, shared.job_id, shared.error, shared.fed_by) for job in plan.jobs]


def recover_results(conn: Connection, runs: list[StagedRun]) -> list[list[QueuedJob]]:
    """After a lost connection: what each run directory says was queued, in one script."""
    plans = [staged.plan for staged in runs]
    script = render_template("recover-submitted.sh.j2", runs=plans)
    deadline = clock() + SETTLE_SECONDS
    while True:
        stdout = conn.run_script(script).stdout
        parts = split_by_run(stdout, [plan.run_id for plan in plans])
        gone = contract.SUBMISSION_GONE_MARKER in stdout.split()
        settled = gone or all(_settled(parts[plan.run_id]) for plan in plans)
        if settled or clock() >= deadline:
            break
        sleep(SETTLE_POLL_SECONDS)
    answers = [[_lost_unless_queued(plan, r, settled) for r in _parse(plan, parts[plan.run_id])] for plan in plans]
    return answered_by_hosts(plans, answers)


def _settled(log: str) -> bool:
    """Whether a run's submission has ended: its log's last line says so, or its directory was
    never made (the script never ran: bash reads it whole first)."""
    lines = log.split()
    return bool(lines) and lines[-1] in (contract.SUBMISSION_ENDED_MARKER, contract.RUN_DIR_ABSENT_MARKER)


def _lost_unless_queued(plan: RunPlan, queued: QueuedJob, settled: bool) -> QueuedJob:
    """A job the submission log has no word of, once the submission has ended, was never queued:
    the connection went first. Before it has ended (it runs on without the connection), it may
    still be: unknown, and where to look."""
    backend = backend_named(plan.backend)
    if queued.job_id or queued.error != no_result(backend):
        return queued
    if settled:
        why = f"not submitted: the connection was lost before its {backend.submit_command} ran"
    else:
        log = f"{plan.run_dir}/{contract.SUBMITTED_LOG}"
        why = f"unknown: its submission was still running {SETTLE_SECONDS} s after the connection was lost; {log} lists it once queued"
    return QueuedJob(queued.benchmark, None, why)


def site_limits_script(backend: Backend, demands: list[QueueDemand]) -> str | None:
    """The script asking what the site lets the user queue for these jobs
    (``templates/site-limits.sh.j2``); None when their backend asks nothing."""
    request = backend.limits_request(demands)
    if request is None:
        return None
    return render_template("site-limits.sh.j2", **backend_context(backend), request=request)


def write_remote_files(conn: Connection, files: dict[str, str], mode: int = 0o644) -> None:
    """Several small files in one script (``write_files_script``); OSError naming what failed."""
    script = write_files_script(files, mode)
    result = conn.run_script(script)
    if result.returncode != 0:
        raise OSError(" ".join(result.stderr.split()) or f"exit status {result.returncode}")


def write_files_script(files: dict[str, str], mode: int = 0o644) -> str:
    """The script writing ``files`` (path -> text: a sweep's records), a text bound for several
    paths sent once (``templates/write-files.sh.j2``)."""
    paths_of: dict[str, list[str]] = {}
    for path, content in files.items():
        paths_of.setdefault(content.rstrip("\n"), []).append(path)
    groups = [{"first": paths[0], "copies": paths[1:], "content": content} for content, paths in paths_of.items()]
    return render_template("write-files.sh.j2", groups=groups, mode=f"{mode:o}")
