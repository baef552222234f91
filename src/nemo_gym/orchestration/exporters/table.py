"""Export to a shared table: ``<dir>/results.csv`` and ``<dir>/results.json``, one row per run and
benchmark, every run's rows kept (the history of a benchmark is its rows over runs).

An export upserts its row: the row of the same (run id, benchmark) is replaced, every other row
stays. The columns are stable: the identity, state, completeness and cost columns first
(``FIXED_COLUMNS``), then one column per metric in the order metrics first appeared; a new metric
adds a column at the end, and no column is ever dropped or moved, so a spreadsheet or a script
reading the CSV by header keeps working. ``results.json`` is the source of truth
(``{"version": 1, "columns": [...], "rows": [{column: value, ..., "params": {...}}]}``: the rows
also carry the flat params, which would make the CSV thousands of columns wide); the CSV is
rewritten from it each time.

Several jobs finish at once and write the same table: every upsert holds an exclusive ``lockf``
lock on ``<dir>/.results.lock`` (POSIX locks reach other hosts on a shared file system) while it
reads, merges and replaces both files, each written to a temporary file and renamed over the old
one, so a reader never sees half a file. A ``results.json`` that is not such a table is never
overwritten: the export fails and says so.

Stdlib only, Python 3.8 syntax.
"""

from __future__ import annotations

import csv
import errno
import fcntl
import io
import json
import math
import os
import time
from collections.abc import Callable
from typing import Any

from nemo_gym.orchestration.exporters import record as r

CSV_FILE = "results.csv"
JSON_FILE = "results.json"
LOCK_FILE = ".results.lock"
TABLE_VERSION = 1
FIXED_COLUMNS = (
    "run_id",
    "sweep_id",
    "benchmark",
    "model",
    "served_name",
    "state",
    "samples_written",
    "samples_expected",
    "complete",
    "gpu_hours",
    "wall_seconds",
    "exported_at",
)
KEY_COLUMNS = ("run_id", "benchmark")
PARAMS_FIELD = "params"
# A metric whose name is a fixed column's gets this prefix, so that it never overwrites one.
METRIC_CLASH_PREFIX = "metric:"


def metric_column(name: str) -> str:
    return METRIC_CLASH_PREFIX + name if name in FIXED_COLUMNS or name == PARAMS_FIELD else name


def table_row(record: r.ExportRecord, exported_at: str) -> dict[str, Any]:
    row: dict[str, Any] = {
        "run_id": record.run_id,
        "sweep_id": record.sweep_id,
        "benchmark": record.benchmark,
        "model": record.model,
        "served_name": record.served_name,
        "state": str(record.state),
        "samples_written": record.written,
        "samples_expected": record.expected,
        "complete": record.complete,
        "gpu_hours": None if record.gpu_hours is None else round(record.gpu_hours, 6),
        "wall_seconds": None if record.wall_seconds is None else round(record.wall_seconds, 3),
        "exported_at": exported_at,
    }
    for name, value in record.metrics.items():
        row[metric_column(name)] = value
    row[PARAMS_FIELD] = dict(record.params)
    return row


def merged_columns(columns: list[str], row: dict[str, Any]) -> list[str]:
    """The table's columns, then the row's new ones in the row's order; fixed columns always first."""
    out = list(FIXED_COLUMNS) + [col for col in columns if col not in FIXED_COLUMNS]
    out += [key for key in row if key not in out and key != PARAMS_FIELD]
    return out


def upserted(rows: list[dict[str, Any]], row: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows with ``row`` in place of the one of the same key (where it was), or appended."""
    key = tuple(row.get(k) for k in KEY_COLUMNS)
    out = []
    replaced = False
    for existing in rows:
        if tuple(existing.get(k) for k in KEY_COLUMNS) == key:
            if not replaced:
                out.append(row)
                replaced = True
            continue
        out.append(existing)
    if not replaced:
        out.append(row)
    return out


def csv_text(columns: list[str], rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(col)) for col in columns])
    return buffer.getvalue()


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else ""
    return str(value)


# -- the files -----------------------------------------------------------------------------------------


def read_table(directory: str) -> tuple[list[str], list[dict[str, Any]]]:
    """(columns, rows) of the table in ``directory``; empty when there is none yet."""
    path = os.path.join(directory, JSON_FILE)
    try:
        with open(path) as fh:
            text = fh.read()
    except FileNotFoundError:
        return _read_csv_only(directory)
    except OSError as exc:
        raise r.ExportError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    valid = (
        isinstance(data, dict)
        and isinstance(data.get("columns"), list)
        and isinstance(data.get("rows"), list)
        and all(isinstance(row, dict) for row in data["rows"])
    )
    if not valid:
        raise r.ExportError(f"{path} is not a results table this exporter wrote; move it away or choose another dir")
    return [str(col) for col in data["columns"]], list(data["rows"])


def _read_csv_only(directory: str) -> tuple[list[str], list[dict[str, Any]]]:
    """A table whose JSON is gone (deleted by hand) is rebuilt from its CSV rather than started
    afresh: the history it holds is the point of the table. Cells come back as text, params do not."""
    path = os.path.join(directory, CSV_FILE)
    try:
        with open(path, newline="") as fh:
            reader = csv.DictReader(fh)
            rows = [{k: (v if v != "" else None) for k, v in row.items()} for row in reader]
            columns = list(reader.fieldnames or [])
    except FileNotFoundError:
        return [], []
    except (OSError, csv.Error) as exc:
        raise r.ExportError(f"cannot read {path} (and there is no {JSON_FILE}): {exc}") from None
    if columns and not set(KEY_COLUMNS) <= set(columns):
        raise r.ExportError(f"{path} is not a results table this exporter wrote; move it away or choose another dir")
    return columns, rows


def _replace(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", newline="") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def write_table(directory: str, columns: list[str], rows: list[dict[str, Any]]) -> None:
    """Replace both files; the JSON first, as the CSV is derived from it."""
    document = {"version": TABLE_VERSION, "columns": columns, "rows": rows}
    _replace(os.path.join(directory, JSON_FILE), json.dumps(document, indent=1) + "\n")
    _replace(os.path.join(directory, CSV_FILE), csv_text(columns, rows))


class TableLock:
    def __init__(self, directory: str, timeout: float = 120.0, poll: float = 0.05) -> None:
        self.path = os.path.join(directory, LOCK_FILE)
        self.timeout = timeout
        self.poll = poll
        self._fd: int | None = None

    def __enter__(self) -> TableLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o664)
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EACCES, errno.EAGAIN):
                    os.close(fd)
                    raise r.ExportError(
                        f"cannot lock {self.path} ({exc.strerror or exc}): the file system "
                        "of the table's dir must support POSIX locks"
                    ) from None
                # Polled rather than blocking: a lock held by a job on a lost node must end in a
                # failed export the job can report, never in a job that hangs until its walltime.
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise r.ExportError(f"{self.path} stayed locked for {self.timeout:g}s by another export") from None
                time.sleep(self.poll)
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def upsert_row(directory: str, row: dict[str, Any], lock_timeout: float = 120.0) -> int:
    """Upsert one row under the table's lock; the number of rows the table then has."""
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise r.ExportError(f"cannot create the table directory {directory}: {exc.strerror or exc}") from None
    with TableLock(directory, lock_timeout):
        columns, rows = read_table(directory)
        rows = upserted(rows, row)
        write_table(directory, merged_columns(columns, row), rows)
        return len(rows)


def export_to_table(
    record: r.ExportRecord, settings: dict[str, Any], on_run_id: Callable[[str], None], now: float | None = None
) -> r.ExportOutcome:
    directory = settings.get("dir")
    if not directory:
        raise r.ExportError("the table exporter needs a dir (the directory of results.csv and results.json)")
    directory = os.path.expanduser(str(directory))
    if not os.path.isabs(directory):  # a spec of before relative dirs were refused at submit
        raise r.ExportError(
            f"the table dir {directory!r} is relative, which names another table wherever the export "
            "runs: set an absolute job.export.table.dir and resubmit"
        )
    on_run_id(record.export_key)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if now is None else now))
    try:
        count = upsert_row(directory, table_row(record, stamp))
    except OSError as exc:
        raise r.ExportError(f"cannot write the table in {directory}: {exc.strerror or exc}") from None
    return r.ExportOutcome(
        record.export_key, f"row {record.export_key} in {os.path.join(directory, CSV_FILE)} ({count} rows)"
    )
