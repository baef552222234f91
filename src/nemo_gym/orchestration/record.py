"""The record of a submission: which job each benchmark became, where its files are.

Written into the run directory (``gym-job.json``) and into a local index
(``$XDG_CACHE_HOME/nemo-gym/jobs/<run id>.json``) that ``gym eval list/status`` read.

A sweep (``gym eval submit -m``) is several runs, each recorded as above with its sweep id and
swept values, plus the sweep's own record: its runs in order, with their values. That record goes
into the index (``<sweep id>.sweep.json``) and into every run directory of the sweep
(``gym-sweep.json``): the runs need not share a parent directory (the output path, even the
host, can be swept), and a run directory is what gets copied and read where it lies, so each one
says which sweep it belongs to and where its siblings are.
"""

from __future__ import annotations

import getpass
import json
import math
import os
import posixpath
import re
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from nemo_gym.orchestration import __version__, contract, untrusted
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.estimate import Spent
from nemo_gym.orchestration.rules import BENCHMARK_NAME_RE
from nemo_gym.orchestration.runid import RUN_ID_RE, SWEEP_ID_RE, checked_id
from nemo_gym.orchestration.untrusted import Unreadable
from nemo_gym.orchestration.watch_state import WatchState

SCHEMA_VERSION = 2
# A record that uses nothing newer than version 1 says 1, so that an older version still reads it;
# one with shards or a shared sweep deployment says 2 (an older version would misread it: a
# sharded benchmark as never queued, its shards left running by its cancel).
PLAIN_SCHEMA_VERSION = 1
RECORD_NAME = contract.RECORD_FILE


# Field names follow NeMo Gym 0.7.0's record, which other tools read: ``gym_job_id`` is the run id,
# ``executor`` the backend's name, ``cluster`` the compute's name.


# A record's validators are built when one is first read or written, not on import: a dry run
# reads none (each verb pays for what it uses).
_BUILT_ON_FIRST_USE = ConfigDict(defer_build=True)


class BenchmarkJob(BaseModel):
    model_config = _BUILT_ON_FIRST_USE
    benchmark: str
    job_dir: str
    job_id: str | None  # None exactly when the job could not be queued
    error: str | None = None
    # The GPUs the job's allocation holds, for its GPU-hours where there is no accounting (the
    # plan's count; on this machine, the GPUs it showed at submit). None in older records.
    gpus: int | None = None
    # Exporter -> where it sends the job's results (``exporters.spec.destination``), as submitted.
    # Only the local index's copy is believed: ``gym eval export`` sends credentials only there.
    export_to: dict[str, str] = {}
    # Whether its driver keeps the rows on disk and generates only the rest once gym eval resubmit
    # marks it (gym eval run, from this version on; never a benchmark's own command).
    continues_from_disk: bool = False
    # What its job was queued under, in its backend's words (``Backend.queue_facts``: Slurm's
    # account, partition, QOS, array), so that gym eval resubmit weighs it against the site's
    # limits as the submission did. Empty in older records (then not weighed).
    queued_as: dict[str, str] = {}
    # Not queued by the submission but by the job before it in its lane, as that one starts
    # (``feeding``): that job, as ``run/benchmark``. Its id is then in its chain file.
    fed_by: str | None = None
    # A sharded benchmark's shards, each a job of its own (``benchmark`` ``B@k``, ``job_dir`` its
    # shard's directory); the benchmark's own entry has no job then, and its ``job_dir`` holds what
    # the shards merged into. Empty for a benchmark run as one job.
    shards: list[BenchmarkJob] = []

    @property
    def queued(self) -> bool:
        """Whether it was queued, or is to be by its lane (else it was refused: ``error``); a
        sharded benchmark's, whether any shard was."""
        if self.shards:
            return any(shard.queued for shard in self.shards)
        return self.job_id is not None or self.fed_by is not None

    @property
    def units(self) -> list[BenchmarkJob]:
        """The jobs it runs as: its shards, or itself."""
        return list(self.shards) or [self]

    @field_validator("fed_by")
    @classmethod
    def _plain_label(cls, value: str | None) -> str | None:
        # Shown to the user: a short printable word or nothing.
        return (
            value
            if value is None or (len(value) <= 300 and value.isprintable())
            else value[:300].encode("unicode_escape").decode()
        )

    @field_validator("queued_as")
    @classmethod
    def _plain_facts(cls, value: dict[str, str]) -> dict[str, str]:
        # Read back from a run directory too: only short printable words reach a script (quoted).
        return {k: v for k, v in value.items() if len(k) <= 32 and len(v) <= 256 and (k + v).isprintable()}


class SubmissionRecord(BaseModel):
    model_config = _BUILT_ON_FIRST_USE
    gym_job_id: str
    gym_version: str = __version__
    submitted_at: str
    run_dir: str
    cluster: str
    executor: str
    submitted_by: str
    benchmarks: list[BenchmarkJob]
    hostname: str | None = None
    executor_metadata: dict[str, str] = {}
    schema_version: int = PLAIN_SCHEMA_VERSION
    # The sweep this run is one combination of, and its swept values (key -> value as written).
    sweep_id: str | None = None
    sweep_values: dict[str, str] = {}
    # Where it was submitted from (``submission_origin``), so that --last means the user's last.
    submitted_from: str | None = None
    model: str | None = None  # the policy's model (checkpoint), as the config names it
    # The variables the submission exported for its jobs (host: secrets, the collector's token, the
    # exporters' credentials) -> the submitting shell's variable each was read from; names only,
    # never a value. gym eval resubmit reads them again from its shell. Only the local index's copy
    # is believed (a run directory's could name any variable of yours).
    carried_from: dict[str, str] = {}
    # job.deployment: shared: the run whose shared job runs this run's benchmarks (its own id, or
    # in a sweep whose runs share one, the first's: a run directory beside this one), and the
    # other runs it runs too. None and empty for a deployment per benchmark (and older records).
    deployment_host: str | None = None
    deployment_shared_with: list[str] = []
    # Whether that shared job skips a benchmark whose cancel marker appears (from this version on),
    # so that some of the runs it serves can be cancelled alone; an older one's is cancelled whole.
    deployment_skips_cancelled: bool = False

    @property
    def shared_deployment_dir(self) -> str:
        """The directory of the shared job that runs this run's benchmarks: its own run's, or its
        host's beside it (a path made from names, never read from the record)."""
        host = self.deployment_host or self.gym_job_id
        return contract.job_dir(contract.job_dir(posixpath.dirname(self.run_dir), host), contract.SHARED_DEPLOYMENT_DIR)

    @property
    def is_guest(self) -> bool:
        """Whether another run's shared job runs this run's benchmarks (and counts their GPU-hours)."""
        return self.deployment_host is not None and self.deployment_host != self.gym_job_id

    @field_validator("gym_job_id")
    @classmethod
    def _a_run_id(cls, value: str) -> str:
        # Read back from a run directory too, and a file name in the index: only an id's shape.
        return checked_id(value, RUN_ID_RE, "run id")

    @field_validator("deployment_host")
    @classmethod
    def _run_id_name(cls, value: str | None) -> str | None:
        # Read back from a run directory too: it names a directory beside the run's, so a name.
        if value is not None and not RUN_ID_RE.fullmatch(value):
            raise ValueError(f"{value[:200]!r} is not a run id")
        return value

    @field_validator("deployment_shared_with")
    @classmethod
    def _run_ids(cls, value: list[str]) -> list[str]:
        return [v for v in value if RUN_ID_RE.fullmatch(v)][:10000]

    @field_validator("executor")
    @classmethod
    def _known_executor(cls, value: str) -> str:
        from nemo_gym.orchestration.backends import backend_names

        if value not in backend_names():
            raise ValueError(f"no backend {value!r} (known: {', '.join(backend_names())})")
        return value

    @field_validator("hostname")
    @classmethod
    def _plain_hostname(cls, value: str | None) -> str | None:
        # Handed to ssh as its destination: an option (-oProxyCommand=...) or a space is no host.
        if value is not None and (
            not value or value.startswith("-") or any(c.isspace() or not c.isprintable() for c in value)
        ):
            raise ValueError(f"{value!r} is not a host name")
        return value

    @property
    def units(self) -> list[BenchmarkJob]:
        """Every job of the run: each benchmark's, a sharded benchmark's shards one by one."""
        return [unit for bench in self.benchmarks for unit in bench.units]

    @property
    def failed(self) -> list[BenchmarkJob]:
        """The jobs that could not be queued (a shard of a sharded benchmark by its own name)."""
        return [unit for unit in self.units if not unit.queued]

    @model_validator(mode="after")
    def _version_of_what_it_uses(self) -> SubmissionRecord:
        if any(bench.shards for bench in self.benchmarks) or self.is_guest or self.deployment_shared_with:
            self.schema_version = max(self.schema_version, SCHEMA_VERSION)
        return self

    def dumps(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


def values_label(values: Mapping[str, str]) -> str:
    """A combination's name: ``services.policy.model=/ckpt/step-100, run.limit=5``."""
    return ", ".join(f"{key}={value}" for key, value in values.items())


class SweepRun(BaseModel):
    model_config = _BUILT_ON_FIRST_USE
    run_id: str
    run_dir: str
    values: dict[str, str]  # swept key -> value as written, in the order of the sweep

    @field_validator("run_id")
    @classmethod
    def _a_run_id(cls, value: str) -> str:
        return checked_id(value, RUN_ID_RE, "run id")


class SweepRecord(BaseModel):
    model_config = _BUILT_ON_FIRST_USE
    sweep_id: str
    submitted_at: str
    submitted_by: str
    config: str  # the config file the combinations were composed from
    swept: list[str]  # the swept keys, in the order written
    executor: str
    hostname: str | None
    runs: list[SweepRun]
    schema_version: int = PLAIN_SCHEMA_VERSION
    submitted_from: str | None = None
    # gym eval watch's sweep: what it watches and every checkpoint it has seen (its runs grow as
    # checkpoints appear); None for a sweep submitted at once (-m).
    watch: WatchState | None = None

    @field_validator("sweep_id")
    @classmethod
    def _a_sweep_id(cls, value: str) -> str:
        return checked_id(value, SWEEP_ID_RE, "sweep id")

    @model_validator(mode="after")
    def _version_of_what_it_uses(self) -> SweepRecord:
        if self.watch is not None:
            self.schema_version = max(self.schema_version, SCHEMA_VERSION)
        return self

    def dumps(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


def now_utc() -> str:
    # Milliseconds: runs submitted within one second (a sweep and a lone run) still sort in order.
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def current_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name is not worth failing a submit
        return "unknown"


def submission_origin() -> str:
    """``<machine>:<session>``: the terminal session this command runs in (its leader's pid and
    start time, so a reused pid is another session), or ``GYM_SESSION`` when a script names its own.
    Commands typed in one terminal, and the scripts they start, share it; another terminal, a cron
    job or a test suite running beside them does not."""
    machine = socket.gethostname()
    named = os.environ.get("GYM_SESSION")
    if named:
        return f"{machine}:{named}"
    sid = os.getsid(0)
    if sid <= 0:
        # The session's leader lives outside this PID namespace (a container started without a
        # terminal): everything in the container is one session, named by the namespace.
        return f"{machine}:{_pid_namespace()}"
    try:
        with open(f"/proc/{sid}/stat") as fh:
            started = fh.read().rsplit(")", 1)[1].split()[19]  # field 22, after the command's name
    except (OSError, IndexError):
        started = "?"
    return f"{machine}:{sid}.{started}"


def _pid_namespace() -> str:
    try:
        return "ns-" + os.readlink("/proc/self/ns/pid").strip("pid:[]")
    except OSError:
        return "ns-unknown"


def machine_of(origin: str | None) -> str | None:
    return origin.split(":", 1)[0] if origin else None


def index_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nemo-gym" / "jobs"


def write_local_index(record: SubmissionRecord) -> Path | None:
    """Best effort: the jobs are queued already, so a full disk here must not fail the submit."""
    return write_index_file(index_dir() / f"{record.gym_job_id}.json", record.dumps())


def write_sweep_index(sweep: SweepRecord) -> Path | None:
    """Best effort, like a run's: the runs' own index entries name their sweep too."""
    return write_index_file(index_dir() / f"{sweep.sweep_id}{SWEEP_INDEX_SUFFIX}", sweep.dumps())


SWEEP_INDEX_SUFFIX = ".sweep.json"
# Observations live apart from the records: a run's record is ``<run id>.json`` in the index.
OBSERVED_DIR = "observed"
_INDEX_NAME_RE = re.compile(rf"(?:{RUN_ID_RE.pattern}|{SWEEP_ID_RE.pattern})(?:[.][a-z]+)+")


def write_observation(run_id: str, summary: str, spent: list[Spent] | None = None) -> None:
    """What ``status`` last saw of a run (best effort): its state for ``list`` to show without
    asking, and what its successful jobs cost, for later submissions' estimates. What the results
    store was last given of it (``stored_marks``) is kept."""
    document = {"state": summary, "at": now_utc(), "spent": [asdict(s) for s in spent or []]}
    marks = stored_marks(run_id)
    _write_observed(run_id, {**document, STORED_KEY: marks} if marks else document)


def stored_marks(run_id: str) -> dict[str, str]:
    """What the results store was last given of the run (``library.storing``'s digests), as its
    observation keeps them; {} when never, or unreadable (the run is then written again)."""
    marks = _observation(run_id).get(STORED_KEY)
    if not isinstance(marks, dict):
        return {}
    return {k: v for k, v in marks.items() if isinstance(k, str) and isinstance(v, str) and len(v) <= 4096}


def remember_stored(run_id: str, marks: dict[str, str]) -> None:
    """The run's observation, its ``stored_marks`` now ``marks`` (best effort, like the rest)."""
    _write_observed(run_id, {**_observation(run_id), STORED_KEY: marks})


def _observation(run_id: str) -> dict[str, Any]:
    try:
        return untrusted.load_object_file(
            index_dir() / OBSERVED_DIR / f"{run_id}.json", "observation", OBSERVATION_MAX_BYTES
        )
    except (untrusted.Unreadable, OSError):
        return {}


def _write_observed(run_id: str, document: dict[str, Any]) -> None:
    write_index_file(index_dir() / OBSERVED_DIR / f"{run_id}.json", json.dumps(document) + "\n")


# Observations read for an estimate: the newest, each bounded like any index file.
SPENT_RUNS_READ = 2000
OBSERVATION_MAX_BYTES = 64 * 1024
STORED_KEY = "stored"


def spent_history(limit: int = SPENT_RUNS_READ) -> list[Spent]:
    """What earlier runs' successful jobs cost, as their observations in the index say (the newest
    ``limit`` runs'); an unreadable observation, or entry, is skipped."""
    folder = index_dir() / OBSERVED_DIR
    try:
        files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)[:limit]
    except OSError:
        return []
    found: list[Spent] = []
    for path in files:
        try:
            data = untrusted.load_object_file(path, "observation", OBSERVATION_MAX_BYTES)
        except (untrusted.Unreadable, OSError):
            continue
        entries = data.get("spent")
        found += [s for s in map(_spent, entries if isinstance(entries, list) else []) if s is not None]
    return found


def _spent(entry: Any) -> Spent | None:
    if not isinstance(entry, dict):
        return None
    benchmark, gpus, hours, wall = (entry.get(k) for k in ("benchmark", "gpus", "gpu_hours", "wall_seconds"))
    if not isinstance(benchmark, str) or type(gpus) is not int or gpus < 0:
        return None
    if not isinstance(hours, (int, float)) or not _finite(hours) or hours < 0:
        return None
    if wall is not None and (not isinstance(wall, (int, float)) or not _finite(wall) or wall < 0):
        return None
    return Spent(benchmark, gpus, float(hours), None if wall is None else float(wall))


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def last_observed(run_id: str) -> tuple[str, str] | None:
    """(state summary, when) as ``status`` last saw the run; None when never seen or unreadable."""
    data = _observation(run_id)
    state, at = data.get("state"), data.get("at")
    return (state, at) if isinstance(state, str) and isinstance(at, str) else None


def write_index_file(path: Path, text: str) -> Path | None:
    """Written whole or not at all (a temporary file in the same folder, renamed over), and only
    under a name an id makes: nothing read back steers where the index writes."""
    if not _INDEX_NAME_RE.fullmatch(path.name):
        print(f"warning: not writing the local index entry {path.name[:80]!r}: not a run or sweep id", file=sys.stderr)
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text)
        tmp.replace(path)
        return path
    except OSError as exc:
        print(f"warning: could not write the local index {path}: {exc}", file=sys.stderr)
        return None


def load_record(data: str | bytes, what: str = RECORD_NAME) -> SubmissionRecord:
    """A run's record, or ``Unreadable`` (one line naming ``what``). Benchmarks whose name is not
    a directory name are refused with a warning line: their files would lie outside the run
    directory (``../other/x``, ``/etc``), and a job's files are read where its name says."""
    record = _validated(SubmissionRecord, data, what)
    kept = []
    for job in record.benchmarks:
        problem = benchmark_name_problem(job.benchmark) or _shards_problem(job)
        if problem:
            warn(f"{what}: benchmark {job.benchmark!r} refused: {problem}")
        else:
            kept.append(rooted(job, record.run_dir))
    return record.model_copy(update={"benchmarks": kept})


def rooted(job: BenchmarkJob, run_dir: str) -> BenchmarkJob:
    """A benchmark's entry with its directories where its name puts them under ``run_dir`` (a
    record read back is believed for names, never for paths), its shards' too."""
    bench_dir = contract.job_dir(run_dir, job.benchmark)
    shards = [
        shard.model_copy(update={"job_dir": contract.shard_dir(bench_dir, k)}) for k, shard in enumerate(job.shards, 1)
    ]
    return job.model_copy(update={"job_dir": bench_dir, "shards": shards})


def _shards_problem(job: BenchmarkJob) -> str | None:
    """Why a sharded benchmark's shards cannot be read where their names put them (``B@1``..)."""
    for k, shard in enumerate(job.shards, 1):
        if shard.benchmark != contract.shard_unit(job.benchmark, k) or shard.shards:
            return f"its shard {k} is recorded as {shard.benchmark!r}, not {contract.shard_unit(job.benchmark, k)!r}"
    return None


def load_sweep_record(data: str | bytes, what: str = contract.SWEEP_RECORD_FILE) -> SweepRecord:
    """A sweep's record, or ``Unreadable`` (one line naming ``what``)."""
    return _validated(SweepRecord, data, what)


def benchmark_name_problem(name: str) -> str | None:
    """Why ``name``, read from a record, cannot be a benchmark's directory in its run directory."""
    if name in (".", "..") or not BENCHMARK_NAME_RE.fullmatch(name):
        return "not a directory name in the run directory (letters, digits, '.', '_' and '-')"
    return None


_Model = TypeVar("_Model", SubmissionRecord, SweepRecord)


def _validated(model: type[_Model], data: str | bytes, what: str) -> _Model:
    doc = untrusted.loads_object(data, what)
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise Unreadable(f"{what}: no usable schema_version")
    if version > SCHEMA_VERSION:
        raise Unreadable(f"{what}: written by a newer version (schema {version}); upgrade to read it")
    try:
        return model.model_validate(doc)
    except ValidationError as err:
        raise Unreadable(f"{what}: {validation_problem(err)}") from None


def validation_problem(err: ValidationError) -> str:
    """A model's refusal on one line: the first field that is wrong, and how many more are."""
    problems = err.errors()
    first = problems[0]
    where = ".".join(str(part) for part in first["loc"]) or "the document"
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    return untrusted.one_line(f"{where}: {first['msg']}{more}")


def warn(line: str) -> None:
    from nemo_gym.orchestration.display import terminal

    print(f"warning: {terminal(line)}", file=sys.stderr)


# -- finding runs ----------------------------------------------------------------------------------


def all_records() -> list[SubmissionRecord]:
    """Every run of the index; an entry that cannot be read is skipped with one warning line."""
    records = _index_entries("gym-job-*.json", load_record)
    return sorted(records, key=lambda r: (r.submitted_at, r.gym_job_id))


def all_sweeps() -> list[SweepRecord]:
    sweeps = _index_entries(f"*{SWEEP_INDEX_SUFFIX}", load_sweep_record)
    return sorted(sweeps, key=lambda s: (s.submitted_at, s.sweep_id))


def _index_entries(pattern: str, load: Callable[[bytes, str], _Model]) -> list[_Model]:
    entries = []
    for path in sorted(index_dir().glob(pattern)):
        try:
            entries.append(load(untrusted.read_bounded(path, str(path)), str(path)))
        except Unreadable as exc:
            warn(f"{exc}; skipped")
    return entries


def indexed_run(run_id: str) -> SubmissionRecord | None:
    """The run of that id as the local index records it (the user's own word, unlike a run
    directory's record); None when the index has no such run. Read from its own entry (named by
    its id), not by reading the whole index: a watch of 5,000 checkpoints asks for each."""
    if not RUN_ID_RE.fullmatch(run_id):
        return None
    path = index_dir() / f"{run_id}.json"
    try:
        record = load_record(untrusted.read_bounded(path, str(path)), str(path))
    except Unreadable as exc:
        if path.exists():
            warn(f"{exc}; skipped")
        return None
    return record if record.gym_job_id == run_id else None


def looks_like_a_directory(name: str) -> bool:
    """Run ids never hold a slash; a path does. A bare name is a directory only when it holds a
    run's record (a run id's suffix may well be the name of some directory here)."""
    return "/" in name or name in (".", "..") or (Path(name) / RECORD_NAME).is_file()


def run_in_directory(path: str) -> SubmissionRecord:
    """The run whose directory is ``path``, read where it lies now: runs are copied to shared or
    archival storage, and a colleague's run is a directory, not an entry of your index. Its paths
    are those under ``path`` and it is read on this machine, whatever its record says."""
    run_dir = os.path.abspath(os.path.expanduser(path))
    record_path = Path(run_dir) / RECORD_NAME
    if not os.path.isdir(run_dir):
        raise UserError(f"no run directory {path}; give a run id (gym eval list), --last or a run's directory")
    if not record_path.is_file():
        raise UserError(
            f"{path} is not a run directory (it has no {RECORD_NAME}); give the directory gym eval submit "
            f"printed (<output_path>/<run id>)"
        )
    try:
        record = load_record(untrusted.read_bounded(record_path, str(record_path)), str(record_path))
    except Unreadable as exc:
        raise UserError(f"cannot read the run's record: {exc}") from None
    jobs = [rooted(b, run_dir) for b in record.benchmarks]
    return record.model_copy(update={"run_dir": run_dir, "benchmarks": jobs, "hostname": None})


def your_last(records: list[SubmissionRecord]) -> SubmissionRecord:
    """The newest of ``records`` submitted from this terminal session; without one, the newest this
    user submitted on this machine (said on stderr). Never someone else's, nor another machine's."""
    origin = submission_origin()
    from_here = [r for r in records if r.submitted_from == origin]
    if from_here:
        return from_here[-1]
    user, machine = current_user(), machine_of(origin)
    yours = [r for r in records if r.submitted_by == user and machine_of(r.submitted_from) in (machine, None)]
    if not yours:
        raise UserError(
            f"no submission by {user} on {machine} in the local index ({index_dir()}); name a run (gym eval list)"
        )
    from nemo_gym.orchestration.display import terminal

    # The id is read from the index: shown escaped, like every label read back.
    print(
        terminal(
            f"note: --last is {yours[-1].gym_job_id}, your newest submission on {machine} "
            f"(none was made from this shell session)"
        ),
        file=sys.stderr,
    )
    return yours[-1]
