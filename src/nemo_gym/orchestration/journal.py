"""A submission under way, as the local index keeps it: written before anything is staged or
queued, removed once every run of it is recorded. A ``gym eval submit`` killed in between (the
terminal closed, SIGKILL, a crash) leaves it, so the next submit of the same config finds what
that one queued and records it instead of queueing a second copy (``verbs.submit.use_case``).

What identifies "the same config": a digest of every run's validated config and swept values,
in order, with the host they go to; never the config itself (it may hold a ``lit:`` value)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from nemo_gym.orchestration import untrusted
from nemo_gym.orchestration.record import index_dir, machine_of, now_utc, submission_origin, write_index_file
from nemo_gym.orchestration.runid import RUN_ID_RE, SWEEP_ID_RE
from nemo_gym.orchestration.untrusted import Unreadable

JOURNAL_DIR = "pending"
_SUFFIX = ".pending.json"
JOURNAL_MAX_BYTES = 1024 * 1024
JOURNALS_READ = 200  # the newest; more are left for gym eval list to never show


@dataclass(frozen=True)
class Journal:
    """One submission under way."""

    name: str  # the sweep's id, or the lone run's
    digest: str  # fingerprint(...) of what it submits
    hostname: str | None
    origin: str  # submission_origin() of the shell that ran it
    pid: int
    started: str
    run_ids: tuple[str, ...]
    sweep_id: str | None = None

    @property
    def path(self) -> Path:
        return index_dir() / JOURNAL_DIR / f"{self.name}{_SUFFIX}"

    def alive(self) -> bool:
        """Whether the submit that wrote it may still be running: on this machine, its process
        is there (on another, it cannot be told: taken to be gone)."""
        if machine_of(self.origin) != machine_of(submission_origin()):
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except OSError:  # it exists, as another user's
            return True
        return True


def fingerprint(hostname: str | None, runs: Sequence[tuple[dict[str, Any], Sequence[tuple[str, str]]]]) -> str:
    """What makes two submissions the same: the host, and each run's config and swept values, in order."""
    document = json.dumps([hostname, [[config, list(values)] for config, values in runs]], sort_keys=True, default=str)
    return hashlib.sha256(document.encode()).hexdigest()


def begin(name: str, digest: str, hostname: str | None, run_ids: Sequence[str], sweep_id: str | None) -> Journal:
    """Written before anything is staged (best effort, like every index write)."""
    journal = Journal(name, digest, hostname, submission_origin(), os.getpid(), now_utc(), tuple(run_ids), sweep_id)
    write_index_file(journal.path, json.dumps(asdict(journal)) + "\n")
    return journal


def end(journal: Journal) -> None:
    """Every run of it recorded: nothing is left to find."""
    try:
        journal.path.unlink()
    except OSError:
        pass


def pending() -> list[Journal]:
    """The submissions begun and never ended, newest first; an entry that cannot be read is passed over."""
    folder = index_dir() / JOURNAL_DIR
    found = []
    for path in sorted(folder.glob(f"*{_SUFFIX}"), reverse=True)[:JOURNALS_READ]:
        try:
            data = json.loads(untrusted.read_bounded(path, str(path), JOURNAL_MAX_BYTES))
        except (Unreadable, ValueError, RecursionError):
            continue
        journal = _journal(data)
        if journal is not None and journal.path == path:
            found.append(journal)
    return sorted(found, key=lambda j: j.started, reverse=True)


def _journal(data: object) -> Journal | None:
    """A journal read back, or None: every id by its one pattern, every field of its type."""
    if not isinstance(data, dict):
        return None
    try:
        journal = Journal(
            name=str(data["name"]),
            digest=str(data["digest"]),
            hostname=None if data.get("hostname") is None else str(data["hostname"]),
            origin=str(data["origin"]),
            pid=int(data["pid"]),
            started=str(data["started"]),
            run_ids=tuple(str(r) for r in data["run_ids"]),
            sweep_id=None if data.get("sweep_id") is None else str(data["sweep_id"]),
        )
    except (KeyError, TypeError, ValueError):
        return None
    ids_ok = all(RUN_ID_RE.fullmatch(r) for r in journal.run_ids) and journal.run_ids
    sweep_ok = journal.sweep_id is None or SWEEP_ID_RE.fullmatch(journal.sweep_id)
    name_ok = journal.name == (journal.sweep_id or (journal.run_ids[0] if journal.run_ids else ""))
    return journal if ids_ok and sweep_ok and name_ok and 0 < journal.pid < 2**31 else None
