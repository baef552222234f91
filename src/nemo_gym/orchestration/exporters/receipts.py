"""Receipts: what each exporter did for a job, so that a requeued or resumed job, or
``gym eval export`` later, does each export once.

One JSON file per exporter, ``<job dir>/.gym/exports/<exporter>.json``::

    {"state": "running" | "done" | "failed", "backend_run_id": "...", "detail": "one line",
     "time": "2026-11-30T21:51:58Z", "fingerprint": "...", "attempts": 2}

``running`` is written before an export starts, so a receipt left ``running`` means the export was
cut short (the job killed, the node lost): it is retried. ``done`` is skipped unless forced or the
results changed since (another fingerprint: a resumed job wrote more rollouts). ``failed`` is
retried. A lock file beside each receipt keeps two processes (the job and a ``gym eval export`` run
at the same moment) from doing one export twice at once.

Stdlib only, Python 3.8 syntax.
"""

from __future__ import annotations

import fcntl
import json
import os
import time

from nemo_gym.orchestration import contract as c
from nemo_gym.orchestration import facts as f
from nemo_gym.orchestration import untrusted as u

# Job-directory paths of the exports (relative to the job directory). They belong with the
# run-directory contract; they live here until the contract names them.
EXPORTS_DIR = c.EXPORTS_DIR  # receipts and their locks
SPEC_FILE = f"{c.EXPORTERS_DIR}/export-spec.json"  # the exporters' modules are shipped (shipping.py)

# A receipt and its states are ``facts``' (status reads them too).
ReceiptState = f.ReceiptState
Receipt = f.Receipt


def receipt_path(job_dir: str, exporter: str) -> str:
    return os.path.join(job_dir, EXPORTS_DIR, f"{exporter}.json")


def now_text(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))


def read_receipt(job_dir: str, exporter: str) -> Receipt | None:
    """The exporter's receipt, or None when there is none (or it is unreadable: then the export
    runs again, which its backend's idempotence makes safe)."""
    try:
        data = u.read_bounded(receipt_path(job_dir, exporter), "receipt")
    except u.Unreadable:
        return None
    return f.parse_receipt(data)


def write_receipt(job_dir: str, exporter: str, receipt: Receipt) -> None:
    """Replace the receipt atomically: a reader (status, another job) never sees half of one."""
    path = receipt_path(job_dir, exporter)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w") as fh:
        json.dump(receipt.as_dict(), fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


def decide(receipt: Receipt | None, fingerprint: str, force: bool) -> str | None:
    """Why the export runs (a few words for the log), or None when it is done already."""
    if force:
        return "forced"
    if receipt is None:
        return "first export"
    if receipt.state == ReceiptState.RUNNING:
        return "retrying an export that was cut short"
    if receipt.state == ReceiptState.FAILED:
        return "retrying after a failure"
    if receipt.fingerprint and receipt.fingerprint != fingerprint:
        return "the results changed since the last export"
    return None


class ExporterLock:
    """An exclusive lock on one exporter of one job, not waited for: ``acquire`` says whether it got it.

    ``lockf`` (POSIX record locks) rather than ``flock``, because job directories live on shared
    file systems where only the former reaches other hosts.
    """

    def __init__(self, job_dir: str, exporter: str) -> None:
        self.path = os.path.join(job_dir, EXPORTS_DIR, f"{exporter}.lock")
        self._fd: int | None = None

    def acquire(self) -> bool:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
