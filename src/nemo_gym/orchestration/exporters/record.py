"""What one benchmark's export carries, the same for every backend, and the names MLflow accepts.

``ExportRecord`` is pure data: who ran what (run id, sweep id, benchmark, model, served name), the
resolved config as flat params, gym's aggregate metrics, how much of the benchmark was written
(k of n samples), what it cost (GPU-hours, wall time), its state, and where its rollouts lie.
``jobfiles.read_record`` builds one from a job directory; each exporter only reads it.

MLflow is the strictest backend, so the params are made fit for it once, here
(``flatten_config``): keys of alphanumerics, ``_ - . / space`` that do not look like file paths
(``a//b``, ``../x``), at most 250 characters; values at most 500 characters (the oldest servers'
limit; newer ones take 6000). What had to change is said in notes, never silently.

Stdlib only, Python 3.8 syntax: staged into jobs (``steps/exporters/``) and run by the node's
``python3``.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, NamedTuple

from nemo_gym.orchestration import contract as c
from nemo_gym.orchestration import facts as f

PARAM_VALUE_LIMIT = 500
KEY_LIMIT = f.KEY_LIMIT
CUT_MARK = "...[cut]"
# The keys a note names before it just counts: a note is one line in a job's log.
NOTE_EXAMPLES = 3


class ExportError(Exception):
    """An export that cannot be done, as one line that names the fix (never a credential)."""


# -- credentials ------------------------------------------------------------------------------------

_CONTROL_NAMES = {"\r": "a carriage return (CR)", "\n": "a line feed (LF)", "\t": "a tab", "\x00": "a NUL byte"}
# What an Authorization header's value looks like in an exception's text (http.client quotes the
# header it refuses: ``Invalid header value b'Bearer ...'``): the scheme, then the credential.
_AUTH_VALUE = re.compile(r"\b(Bearer|bearer|BEARER)(\s+)[^\s'\",;)]+|\b(Basic|basic|BASIC)(\s+)[A-Za-z0-9+/=]{8,}")


def _is_control(ch: str) -> bool:
    return ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0


def credential_problem(name: str, value: str | None) -> str | None:
    """None when ``value`` can be sent as the credential ``name``; else one line that names the
    variable and the fix, and never shows the value: a control character in a credential is a
    token file's line ending (CRLF), never part of a token, and would break (or be echoed by) the
    request that carries it."""
    if not value or not any(_is_control(ch) for ch in value):
        return None
    trailing = value.rstrip("\r\n")
    if not any(_is_control(ch) for ch in trailing):
        what = "a line ending at its end (CR/LF: a token file saved with Windows line endings?)"
    else:
        first = next(ch for ch in value if _is_control(ch))
        code = f"U+{ord(first):04X}"
        what = f"a control character ({_CONTROL_NAMES.get(first, code)})"
    return (
        f"{name} holds {what}; refused before any request, and not shown: strip it "
        f"(for a token file: export {name}=\"$(tr -d '\\r\\n' < FILE)\")"
    )


def scrub_secrets(text: str, secrets: Any) -> str:
    """``text`` with every secret replaced by ``***``, in each form an exception's text may show it
    (as is, stripped, escaped as ``repr`` escapes it), and any Authorization value whatever it is."""
    forms = set()
    for secret in secrets:
        if secret:
            forms |= {secret, secret.strip(), repr(secret)[1:-1], secret.encode("unicode_escape").decode("ascii")}
    for form in sorted((form for form in forms if form), key=len, reverse=True):
        text = text.replace(form, "***")
    return _AUTH_VALUE.sub(lambda m: f"{m.group(1) or m.group(3)}{m.group(2) or m.group(4)}***", text)


class ExportOutcome(NamedTuple):
    backend_run_id: str  # the backend's own id of what was written (MLflow run id, W&B run id, table row key)
    detail: str  # one line for the receipt and the job's log


class ExportRecord(NamedTuple):
    run_id: str
    sweep_id: str | None
    benchmark: str
    model: str
    served_name: str
    params: dict[str, str]  # flat, MLflow-safe (flatten_config)
    metrics: dict[str, float]  # gym's aggregate metrics under their one name (``facts.benchmark_metrics``)
    written: int  # distinct expected (task, rollout) pairs on disk (all distinct pairs when expected is unknown)
    expected: int | None  # pairs gym meant to write; None when it wrote no list of them
    gpu_hours: float | None
    wall_seconds: float | None
    state: c.Status
    rollouts_path: str | None  # None: the job wrote no rollouts file
    started_at: float | None = None  # epoch seconds of the first job's start
    ended_at: float | None = None  # epoch seconds of the last job's end (or of the export)
    notes: tuple[str, ...] = ()  # what the reader or the flattening had to leave out or change
    step: int | None = None  # the training step of the checkpoint it evaluated: its metrics' step

    @property
    def export_key(self) -> str:
        """The deterministic identity of this export in every backend: one per run and benchmark."""
        return export_key(self.run_id, self.benchmark)

    @property
    def complete(self) -> bool:
        return self.state == c.Status.SUCCEEDED and self.expected is not None and self.written >= self.expected

    def summary_metrics(self) -> dict[str, float]:
        """Completeness and cost as numbers a dashboard can plot beside the benchmark's metrics."""
        out = {"gym/samples_written": float(self.written)}
        if self.expected is not None:
            out["gym/samples_expected"] = float(self.expected)
            out["gym/completeness"] = self.written / self.expected if self.expected else 1.0
        if self.gpu_hours is not None:
            out["gym/gpu_hours"] = self.gpu_hours
        if self.wall_seconds is not None:
            out["gym/wall_seconds"] = self.wall_seconds
        return out

    def identity(self) -> dict[str, str]:
        """Who ran what, as strings (tags, table columns); an unknown sweep is left out."""
        out = {
            "run_id": self.run_id,
            "benchmark": self.benchmark,
            "model": self.model,
            "served_name": self.served_name,
            "state": str(self.state),  # the word itself: W&B writes an Enum by its member's name
        }
        if self.sweep_id:
            out["sweep_id"] = self.sweep_id
        return out

    def completeness_text(self) -> str:
        """``12/12``, or ``12`` when the expected count is unknown."""
        return f"{self.written}/{self.expected}" if self.expected is not None else str(self.written)

    def fingerprint(self) -> str:
        """What a backend would show of this record, hashed: a receipt marked done for the same
        fingerprint needs no new export; new rollouts (a resumed job) or another state do. Times and
        costs are left out: they change with every look without changing the results."""
        content = {
            "key": self.export_key,
            "state": str(self.state),
            "written": self.written,
            "expected": self.expected,
            "metrics": sorted(self.metrics.items()),
            "params": sorted(self.params.items()),
            "step": self.step,
        }
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def export_key(run_id: str, benchmark: str) -> str:
    return f"{run_id}/{benchmark}"


# -- names MLflow accepts: ``facts`` owns them (a metric has the name MLflow gives it everywhere) ------

mlflow_safe_key = f.mlflow_safe_key
mlflow_safe_names = f.mlflow_safe_names


def renamed_note(kind: str, renamed: dict[str, str]) -> str | None:
    """``renamed 2 metric name(s) MLflow refuses: 'pass@1' -> 'pass_1', ...`` or None."""
    changed = [(old, new) for old, new in renamed.items() if old != new]
    if not changed:
        return None
    examples = ", ".join(f"{old!r} -> {new!r}" for old, new in changed[:NOTE_EXAMPLES])
    more = ", ..." if len(changed) > NOTE_EXAMPLES else ""
    return f"renamed {len(changed)} {kind} name(s) MLflow refuses: {examples}{more}"


# -- the resolved config as flat params ---------------------------------------------------------------


def flatten_config(config: Any) -> tuple[dict[str, str], list[str]]:
    """A nested config -> flat ``a.b.c`` params fit for MLflow, and notes of what had to change.

    Mappings join keys with ``.``; lists are indexed (``items.0``, ``items.1``); an empty mapping or
    list is kept as ``{}``/``[]`` so that its key still shows. Values are strings: ``true``/``false``,
    ``null``, numbers as Python writes them, strings as they are (``host:`` references stay
    references: the resolved config never holds a secret). Values over 500 characters are cut and
    marked; keys are made MLflow-safe (``mlflow_safe_key``).
    """
    raw: list[tuple[str, str]] = []
    _flatten_into(raw, "", config)
    keys = mlflow_safe_names([key for key, _ in raw])
    params: dict[str, str] = {}
    cut: list[str] = []
    for key, value in raw:
        if len(value) > PARAM_VALUE_LIMIT:
            value = value[: PARAM_VALUE_LIMIT - len(CUT_MARK)] + CUT_MARK
            cut.append(keys[key])
        params[keys[key]] = value
    notes = []
    renamed = renamed_note("param", keys)
    if renamed:
        notes.append(renamed)
    if cut:
        examples = ", ".join(cut[:NOTE_EXAMPLES]) + (", ..." if len(cut) > NOTE_EXAMPLES else "")
        notes.append(f"cut {len(cut)} param value(s) to {PARAM_VALUE_LIMIT} characters: {examples}")
    return params, notes


def _flatten_into(out: list[tuple[str, str]], prefix: str, value: Any) -> None:
    if isinstance(value, dict):
        if not value and prefix:
            out.append((prefix, "{}"))
        for key, item in value.items():
            _flatten_into(out, f"{prefix}.{key}" if prefix else str(key), item)
    elif isinstance(value, (list, tuple)):
        if not value and prefix:
            out.append((prefix, "[]"))
        for index, item in enumerate(value):
            _flatten_into(out, f"{prefix}.{index}" if prefix else str(index), item)
    elif prefix:
        out.append((prefix, param_text(value)))


def param_text(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
