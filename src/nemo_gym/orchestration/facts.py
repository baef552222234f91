"""Facts read back from a job directory, each defined once: what status, results, the report and
every exporter say of a benchmark comes from here, so that they cannot disagree.

* **metrics**: the names and values of gym's aggregate metrics (``benchmark_metrics``), one name
  per metric everywhere (the terminal, ``results --json``, the report, MLflow, W&B, the table);
* **samples**: the (task, rollout) pair of a row (``task_rollout``), the pairs written and
  expected, and how they compare (``completeness``);
* **times**: when a run of a job started and ended, or its last sign of life (``run_times``,
  ``wall_seconds``);
* **receipts**: what an exporter did for a job (``parse_receipt``).

Stdlib only, Python 3.8 syntax: staged with the exporters beside ``contract.py`` and
``untrusted.py`` (and prepended to ``rollout_projection.py`` where that runs on the submit host).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from enum import Enum
from typing import Any, NamedTuple

from nemo_gym.orchestration import contract as c
from nemo_gym.orchestration import untrusted as u

# -- metric names ------------------------------------------------------------------------------------

# Parts of gym's aggregate document that are per task or per repeat: many rows, no aggregate.
NOT_AGGREGATES = ("group_level_metrics", "repeat_level_metrics")
# gym 0.7.0's two groups of aggregates per agent: all of them, and the few it calls key.
AGENT_METRICS = "agent_metrics"
KEY_METRICS = "key_metrics"
# MLflow's limit on a key's length (metrics, params and tags alike).
KEY_LIMIT = 250
_UNSAFE_KEY_CHARS = re.compile(r"[^A-Za-z0-9_\-. /]")


class Metrics(NamedTuple):
    """A benchmark's aggregate metrics under their one name, and which of them gym calls key."""

    values: dict  # name -> finite value, in the order gym wrote them
    key_names: tuple  # the names of gym's key metrics, in its order


def benchmark_metrics(documents: list) -> Metrics:
    """gym's aggregate metrics documents (one per file) -> the benchmark's metrics.

    gym 0.7.0 writes a list with one entry per agent, each with ``agent_metrics`` and
    ``key_metrics`` (a key metric is one of the agent's too): with one agent the names are gym's
    own (``mean/reward``), with several they are prefixed by the agent's name. Any other shape
    contributes its finite numbers under their ``a/b`` paths; lists and the per-task parts are
    never aggregates. Each name is then made one that MLflow accepts (``mlflow_safe_names``), so
    that every reader shows the same one.
    """
    raw: dict[str, float] = {}
    key: list[str] = []
    for doc in documents:
        for name, value, is_key in _raw_metrics(doc):
            raw[name] = value
            if is_key and name not in key:
                key.append(name)
    names = mlflow_safe_names(list(raw))
    return Metrics({names[n]: v for n, v in raw.items()}, tuple(names[n] for n in key))


def _raw_metrics(doc: Any) -> list:
    """(gym's name, value, whether a key metric) of one document."""
    if not (isinstance(doc, list) and doc and all(isinstance(e, dict) and AGENT_METRICS in e for e in doc)):
        return [(name, value, False) for name, value in _numbers(doc).items()]
    out = []
    for entry in doc:
        prefix = f"{_agent_name(entry)}/" if len(doc) > 1 else ""
        for part in (AGENT_METRICS, KEY_METRICS):
            out += [(prefix + name, value, part == KEY_METRICS) for name, value in _numbers(entry.get(part)).items()]
    return out


def _agent_name(entry: dict) -> str:
    ref = entry.get("agent_ref")
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name) if name else "agent"


def _numbers(data: Any, prefix: str = "") -> dict:
    """Finite numbers of nested mappings under ``a/b`` paths; lists and per-task parts are skipped."""
    out: dict[str, float] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            if key in NOT_AGGREGATES:
                continue
            out.update(_numbers(value, f"{prefix}{key}/" if isinstance(value, dict) else f"{prefix}{key}"))
    elif isinstance(data, (int, float)) and not isinstance(data, bool) and _finite(data):
        out[prefix.rstrip("/")] = float(data)
    return out


def _finite(number: Any) -> bool:
    try:
        return math.isfinite(number)
    except OverflowError:  # an integer beyond float range
        return False


def mlflow_safe_key(name: str) -> str:
    """A metric, param or tag name MLflow accepts, as close to ``name`` as it can be.

    Characters outside ``A-Z a-z 0-9 _ - . / space`` become ``_`` (``pass@1[avg-of-1]/accuracy`` ->
    ``pass_1_avg-of-1_/accuracy``). MLflow also refuses names that change when read as a file path,
    so empty segments go, ``.``/``..`` segments become ``_``/``__``, and a segment that begins with
    ``..`` (``..0``, refused too) begins with ``_.`` instead. Names over 250 characters keep
    their start and end in a hash, so that two long names stay two keys.
    """
    cleaned = _UNSAFE_KEY_CHARS.sub("_", name)
    segments = [_safe_segment(s) for s in cleaned.split("/") if s]
    key = "/".join(segments) or "_"
    if len(key) > KEY_LIMIT:
        digest = hashlib.sha1(name.encode()).hexdigest()[:10]
        key = key[: KEY_LIMIT - len(digest) - 1].rstrip("/") + "_" + digest
    return key


def _safe_segment(segment: str) -> str:
    if segment == ".":
        return "_"
    if segment == "..":
        return "__"
    if segment.startswith(".."):
        return "_" + segment[1:]
    return segment


def mlflow_safe_names(names: list) -> dict:
    """Each name -> its MLflow-safe key, distinct names kept distinct: the first (in gym's order)
    keeps the key, a later name that maps to it gets ``_2``, ``_3``."""
    out: dict[str, str] = {}
    taken: set[str] = set()
    for name in names:
        key = mlflow_safe_key(name)
        if key in taken:
            n = 2
            while f"{key}_{n}" in taken:
                n += 1
            key = f"{key}_{n}"
        taken.add(key)
        out[name] = key
    return out


# -- samples -----------------------------------------------------------------------------------------

TASK_INDEX_KEY = "_ng_task_index"
ROLLOUT_INDEX_KEY = "_ng_rollout_index"
# A row longer than this is refused as one unreadable row, unparsed: a real row (a whole
# conversation) is kilobytes, and parsing hundreds of megabytes costs seconds and gigabytes.
MAX_ROW_BYTES = 64 * 1024 * 1024
# The projection's word in place of a line it refused unread (over MAX_ROW_BYTES).
OVERSIZED = "!oversized"


def parse_row(line: Any) -> dict | None:
    """The JSON object a line holds, or None: not JSON, not an object, or nested deeper than the
    parser's stack (a 200 000-deep line is data, never a crash)."""
    try:
        row = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return row if isinstance(row, dict) else None


def task_rollout(row: dict) -> tuple | None:
    """A row's (task index, rollout index), or None: ``true`` is no index, and neither is 3.0."""
    task, rollout = row.get(TASK_INDEX_KEY), row.get(ROLLOUT_INDEX_KEY)
    if type(task) is int and type(rollout) is int:
        return (task, rollout)
    return None


def is_oversized(line: Any) -> bool:
    """A line refused unread: None (``lines_of``), the projection's ``OVERSIZED``, or one that long
    (a whole file read where it lies without ``python3``)."""
    if line is None or line == OVERSIZED:
        return True
    if isinstance(line, bytes):
        return len(line) > MAX_ROW_BYTES
    return len(line) > MAX_ROW_BYTES // 4 and len(line.encode("utf-8", "surrogatepass")) > MAX_ROW_BYTES


def is_blank(line: Any) -> bool:
    return not line.strip()


class Row(NamedTuple):
    """One non-blank line of a rollouts file: its 1-based number, and what it holds."""

    number: int
    row: dict | None  # None: unreadable (not a JSON object, or oversized)
    pair: tuple | None  # None: no (task, rollout) pair, so unreadable as a sample
    oversized: bool


def rows_of(lines: Any) -> Any:
    """The non-blank lines as ``Row``s; an oversized line is never parsed."""
    for number, line in enumerate(lines, start=1):
        if is_oversized(line):
            yield Row(number, None, None, True)
            continue
        if is_blank(line):
            continue
        row = parse_row(line)
        yield Row(number, row, task_rollout(row) if row is not None else None, False)


class Written(NamedTuple):
    """The pairs of ``rollouts.jsonl``: a duplicate counts once, an unreadable row not at all."""

    pairs: frozenset
    duplicates: int
    unreadable: int  # non-blank lines without a pair (oversized ones included)


def written_pairs(lines: Any) -> Written:
    pairs: set = set()
    duplicates = unreadable = 0
    for row in rows_of(lines):
        if row.pair is None:
            unreadable += 1
        elif row.pair in pairs:
            duplicates += 1
        else:
            pairs.add(row.pair)
    return Written(frozenset(pairs), duplicates, unreadable)


def expected_pairs(lines: Any) -> frozenset:
    """The pairs ``rollouts_materialized_inputs.jsonl`` lists. Strict: gym writes the file in full
    before any rollout runs, so a bad line means it cannot be trusted (a shortened list would make
    an incomplete run look complete): ``untrusted.Unreadable`` naming the first bad line."""
    pairs = set()
    for row in rows_of(lines):
        if row.oversized:
            raise u.Unreadable(f"line {row.number} of the materialized inputs is over {MAX_ROW_BYTES} bytes")
        if row.pair is None:
            raise u.Unreadable(
                f"line {row.number} of the materialized inputs is not a JSON object with integer "
                f"{TASK_INDEX_KEY} and {ROLLOUT_INDEX_KEY}"
            )
        pairs.add(row.pair)
    return frozenset(pairs)


# Provenance of a benchmark's numbers: what it was asked (its inputs) and what it answered (its
# scores), each as one digest that two runs can be compared on.
#
# The inputs digest is over the distinct (task, content) of the materialized inputs, each row's
# content hashed with its rollout index left out: the same tasks at 4 or at 16 repeats are the same
# inputs, and the same prompts in another file order too. Where the projection runs (the run's
# host) each row is cut to its indices plus INPUT_DIGEST_KEY, the digest of its content.
INPUT_DIGEST_KEY = "_ng_orch_input"
# The projected row's group of related tasks (``compare --group-key``): the value of the named field.
GROUP_KEY = "_ng_orch_group"
GROUP_VALUE_MAX = 200


def input_row_digest(row: dict) -> str:
    """A materialized input row's content, its rollout index left out, as 16 hex digits."""
    content = {k: v for k, v in row.items() if k not in (ROLLOUT_INDEX_KEY, INPUT_DIGEST_KEY)}
    text = json.dumps(content, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def inputs_digest(lines: Any) -> str | None:
    """sha256 over the sorted distinct (task, row digest) of the materialized inputs' lines, whole
    rows or projected ones; None when there is no readable row."""
    seen = set()
    for row in rows_of(lines):
        if row.row is None or row.pair is None:
            continue
        given = row.row.get(INPUT_DIGEST_KEY)
        digest = given if isinstance(given, str) and len(given) <= 64 else input_row_digest(row.row)
        seen.add("%d:%s" % (row.pair[0], digest))
    if not seen:
        return None
    return hashlib.sha256("\n".join(sorted(seen)).encode()).hexdigest()


def results_fingerprint(scores: Any) -> str | None:
    """sha256 over the sorted (task, rollout, score) rows ``scores`` maps, a score written as
    Python's shortest round-trip repr (so 1 and 1.0 agree); None without any."""
    if not scores:
        return None
    rows = sorted("%d\t%d\t%r" % (task, rollout, float(value)) for (task, rollout), value in scores.items())
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


# A provenance file is a few short lines; what is read of one is bounded all the same.
PROVENANCE_MAX_BYTES = 4096
PROVENANCE_MAX_KEYS = 32
PROVENANCE_VALUE_CHARS = 200
_PROVENANCE_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")


def parse_provenance(text: str) -> dict:
    """The ``key=value`` lines of a job's provenance file (``contract.PROVENANCE_FILE``): keys of
    letters, digits and ``_.-``, values printable and cut short, the last value of a key kept;
    anything else skipped."""
    found: dict = {}
    for line in text[:PROVENANCE_MAX_BYTES].splitlines():
        key, sep, value = line.partition("=")
        value = "".join(ch for ch in value if ch.isprintable()).strip()[:PROVENANCE_VALUE_CHARS]
        if not sep or not value or not _PROVENANCE_KEY.fullmatch(key):
            continue
        if key not in found and len(found) >= PROVENANCE_MAX_KEYS:
            continue
        found[key] = value
    return found


class Completeness(NamedTuple):
    """Whether a benchmark wrote every rollout it was meant to.

    ``known`` is False when there is no list of expected pairs (gym before 0.7.0 does not write
    one): then ``expected`` and ``complete`` are None, and ``missing`` and ``extra`` are empty
    because nothing can be missing from an unknown list, not because nothing is.
    """

    known: bool
    expected: int | None
    written: int  # distinct pairs written, expected or not
    missing: tuple  # expected pairs not written, sorted
    extra: tuple  # written but not expected: rollouts of other inputs mixed in, sorted
    duplicates: int
    complete: bool | None  # every expected pair written; extra and duplicate rows don't change it

    @property
    def done(self) -> int:
        """Expected pairs written."""
        return self.written - len(self.extra)


def completeness(expected: frozenset | None, written: frozenset, duplicates: int) -> Completeness:
    """Compare written pairs with expected ones; ``expected=None`` means the list is unavailable."""
    if expected is None:
        return Completeness(False, None, len(written), (), (), duplicates, None)
    missing = tuple(sorted(expected - written))
    return Completeness(
        True, len(expected), len(written), missing, tuple(sorted(written - expected)), duplicates, not missing
    )


def job_completeness(job_dir: str) -> tuple:
    """(``Completeness``, notes) of a job directory's rollouts against its expected pairs, read from
    its files: the one reading the exporters and the resume judge make on the node."""
    notes = []
    written = frozenset()  # type: frozenset
    try:
        with u.open_regular(os.path.join(job_dir, c.ROLLOUTS_FILE), "rollouts") as fh:
            written = written_pairs(lines_of(fh)).pairs
    except (OSError, u.Unreadable):  # absent, or not a regular file (a FIFO would never end)
        notes.append("no rollouts file")
    inputs = os.path.basename(c.MATERIALIZED_INPUTS_FILE)
    expected = None
    try:
        with u.open_regular(os.path.join(job_dir, c.MATERIALIZED_INPUTS_FILE), inputs) as fh:
            expected = expected_pairs(lines_of(fh))
    except OSError:
        notes.append(f"no {inputs}: completeness unknown")
    except u.Unreadable:
        notes.append(f"{inputs} cannot be trusted: completeness unknown")
    return completeness(expected, written, 0), notes


def lines_of(fh: Any, limit: int = MAX_ROW_BYTES, block_bytes: int = 1 << 20) -> Any:
    """A binary file split at b"\\n" only (JSON may hold a raw U+2028), the piece after a final
    newline included; None in place of a line longer than ``limit`` bytes.

    Linear time: each block is split once and a line spanning blocks is joined once, at its end
    (never re-copied per block). Bounded memory: a line over ``limit`` is dropped as it grows."""
    parts = []  # type: list[bytes]  # the line so far, in pieces (none kept once it is over the limit)
    size = 0  # the current line's length so far
    for block in iter(lambda: fh.read(block_bytes), b""):
        pieces = block.split(b"\n")
        for piece in pieces[:-1]:
            yield None if size + len(piece) > limit else b"".join([*parts, piece])
            parts, size = [], 0
        size += len(pieces[-1])
        if size > limit:
            parts = []
        else:
            parts.append(pieces[-1])
    yield None if size > limit else b"".join(parts)


# -- a job's times -----------------------------------------------------------------------------------


class Event(NamedTuple):
    time: float
    name: str
    args: list


def parse_events(text: str) -> list:
    """``<epoch> <event> [args]`` lines of ``.gym/<id>/events`` -> ``Event``s, bad lines skipped."""
    out = []
    for line in text.splitlines():
        words = line.split()
        if len(words) < 2:
            continue
        try:
            stamp = float(words[0])
        except ValueError:
            continue
        out.append(Event(stamp, words[1], words[2:]))
    return out


class RunTimes(NamedTuple):
    """One run of a job (one state directory): its ``job-start``, its ``job-end``, and its last sign
    of life (the newest of its last event and its state, heartbeat and log files' mtimes)."""

    start: float | None
    end: float | None
    last_seen: float | None


def run_times(start: float | None, end: float | None, last_event: float | None, mtimes: Any) -> RunTimes:
    seen = [t for t in (*mtimes, last_event) if t is not None]
    return RunTimes(start, end, max(seen) if seen else None)


def times_of_events(events: list, mtimes: Any) -> RunTimes:
    """``run_times`` of parsed events: the first ``job-start``, the last ``job-end``."""
    start = next((e.time for e in events if e.name == c.EVENT_JOB_START), None)
    ends = [e.time for e in events if e.name == c.EVENT_JOB_END]
    last = max((e.time for e in events), default=None)
    return run_times(start, ends[-1] if ends else None, last, mtimes)


def wall_seconds(times: RunTimes, now: float | None, running: bool) -> tuple:
    """(seconds, approximate) of one run of a job that started: to its ``job-end``; still running,
    to now; else (it ended without writing ``job-end``: killed with its node) to its last sign of
    life, and then approximate."""
    assert times.start is not None
    if times.end is not None:
        return max(0.0, times.end - times.start), False
    if running and now is not None:
        return max(0.0, now - times.start), False
    last = times.last_seen if times.last_seen is not None else times.start
    return max(0.0, last - times.start), True


def sign_of_life_files(job_dir: str, state_dir_name: str) -> list:
    """The files whose mtimes are a run's signs of life, beside its events: its state and heartbeat
    files, and (the job's own run, not an earlier run's of a requeued job) the job's log. The status probe
    stats the same files."""
    state_dir = os.path.join(job_dir, c.MARKERS_DIR, state_dir_name)
    files = [os.path.join(state_dir, c.STATE_FILE), os.path.join(state_dir, c.HEARTBEAT_FILE)]
    if c.REQUEUED_RUN_SUFFIX not in state_dir_name:
        files.append(os.path.join(job_dir, c.job_log(state_dir_name)))
    return files


def mtimes_of(paths: list) -> list:
    out = []
    for path in paths:
        try:
            out.append(os.path.getmtime(path))
        except OSError:
            continue
    return out


# -- receipts ----------------------------------------------------------------------------------------


class ReceiptState(str, Enum):
    """Where an exporter's receipt says its export is. Its own ``str`` enum rather than one of
    ``contract.Word``: the rollout projection runs this module without the contract beside it."""

    RUNNING = "running"  # written before the export starts: left so, the export was cut short
    DONE = "done"
    FAILED = "failed"

    def __str__(self) -> str:
        return str(self.value)


class Receipt(NamedTuple):
    state: ReceiptState
    backend_run_id: str
    detail: str
    time: str
    fingerprint: str = ""
    attempts: int = 0

    def as_dict(self) -> dict:
        return dict(self._asdict())


_RECEIPT_WORDS = frozenset(state.value for state in ReceiptState)


def parse_receipt(data: Any, what: str = "receipt") -> Receipt | None:
    """A receipt as an exporter wrote it, or None for anything else (then the export runs again,
    which its backend's idempotence makes safe; status shows none)."""
    try:
        doc = u.loads_object(data, what)
    except u.Unreadable:
        return None
    state = doc.get("state")
    if state not in _RECEIPT_WORDS:
        return None
    attempts = doc.get("attempts")
    return Receipt(
        state=ReceiptState(state),
        backend_run_id=str(doc.get("backend_run_id") or ""),
        detail=str(doc.get("detail") or ""),
        time=str(doc.get("time") or ""),
        fingerprint=str(doc.get("fingerprint") or ""),
        attempts=attempts if type(attempts) is int else 0,
    )
