"""The record of a submission: which job each benchmark became, where its files are.

Written into the run directory (``gym-job.json``) and into a local index
(``$XDG_CACHE_HOME/nemo-gym/jobs/<run id>.json``) that ``gym eval list/status`` read.
"""

from __future__ import annotations

import getpass
import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

from pydantic import BaseModel

from nemo_gym.orchestration import __version__, contract
from nemo_gym.orchestration.errors import UserError

SCHEMA_VERSION = 1
RECORD_NAME = contract.RECORD_FILE


# Field names follow NeMo Gym 0.7.0's record, which other tools read: ``gym_job_id`` is the run id,
# ``executor`` the backend's name, ``cluster`` the compute's name.


class BenchmarkJob(BaseModel):
    benchmark: str
    job_dir: str
    job_id: str | None  # None exactly when the job could not be queued
    error: str | None = None
    # The GPUs the job's allocation holds, for its GPU-hours where there is no accounting (the
    # plan's count; on this machine, the GPUs it showed at submit). None in older records.
    gpus: int | None = None


class SubmissionRecord(BaseModel):
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
    schema_version: int = SCHEMA_VERSION

    @property
    def failed(self) -> list[BenchmarkJob]:
        return [b for b in self.benchmarks if b.job_id is None]

    def dumps(self) -> str:
        return self.model_dump_json(indent=2) + "\n"


def now_utc() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def current_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name is not worth failing a submit
        return "unknown"


def index_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "nemo-gym" / "jobs"


def write_local_index(record: SubmissionRecord) -> Path | None:
    """Best effort: the jobs are queued already, so a full disk here must not fail the submit."""
    path = index_dir() / f"{record.gym_job_id}.json"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(record.dumps())
        tmp.replace(path)
        return path
    except OSError as exc:
        print(f"warning: could not write the local index {path}: {exc}", file=sys.stderr)
        return None


def load_record(text: str) -> SubmissionRecord:
    data = json.loads(text)
    version = data.get("schema_version")
    if not isinstance(version, int):
        raise ValueError("the record has no usable schema_version")
    if version > SCHEMA_VERSION:
        raise ValueError(f"the record was written by a newer version (schema {version}); upgrade to read it")
    return SubmissionRecord.model_validate(data)


# -- finding runs ----------------------------------------------------------------------------------


def all_records() -> list[SubmissionRecord]:
    records = []
    for path in sorted(index_dir().glob("gym-job-*.json")):
        try:
            records.append(load_record(path.read_text()))
        except (OSError, ValueError):
            continue
    return sorted(records, key=lambda r: (r.submitted_at, r.gym_job_id))


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
    try:
        record = load_record(record_path.read_text())
    except FileNotFoundError:
        raise UserError(
            f"{path} is not a run directory (it has no {RECORD_NAME}); give the directory gym eval submit "
            f"printed (<output_path>/<run id>)"
        ) from None
    except (OSError, ValueError) as exc:
        raise UserError(f"{record_path}: cannot read the run's record ({exc})") from None
    jobs = [b.model_copy(update={"job_dir": contract.job_dir(run_dir, b.benchmark)}) for b in record.benchmarks]
    return record.model_copy(update={"run_dir": run_dir, "benchmarks": jobs, "hostname": None})


def find_runs(names: list[str], last: bool = False) -> list[SubmissionRecord]:
    """Several runs, in the order named (``last``: the newest after them); the newest without any."""
    records = [find_run(name) for name in names]
    if last or not names:
        records.append(find_run(None, last=True))
    return records


def find_run(name: str | None, last: bool = False) -> SubmissionRecord:
    """The run a user names: its directory, its id or a unique part of it; the newest with ``last``
    or no name."""
    if name and not last and looks_like_a_directory(name):
        return run_in_directory(name)
    records = all_records()
    if not records:
        raise UserError(f"no runs in the local index ({index_dir()}); submit one with gym eval submit")
    if last or not name:
        return records[-1]
    exact = [r for r in records if r.gym_job_id == name]
    if exact:
        return exact[0]
    matches = [r for r in records if r.gym_job_id.startswith(name) or r.gym_job_id.endswith(name)]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise UserError(f"no run matches {name!r}; see gym eval list")
    listed = ", ".join(r.gym_job_id for r in matches[:5])
    raise UserError(f"{name!r} matches {len(matches)} runs ({listed}); give more of the id")
