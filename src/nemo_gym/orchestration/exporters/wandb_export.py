"""Export to Weights & Biases with the ``wandb`` library, when the python running the exports has it.

One W&B run per run and benchmark, found again by its id: ``wandb_run_id`` derives it from the
export key, and ``wandb.init(id=..., resume="allow")`` continues that run when it exists already.
So a second export (a requeued job, one killed half-way, ``gym eval export --force``) writes the
same run: the config is the same, the summary is set again, and the rollouts artifact, logged with
the same content, is the same artifact version (W&B keys versions by content digest).

The run gets the flat params and the identity as its config, gym's metrics and the completeness and
cost numbers as its summary, and the rollouts file as an artifact of type ``rollouts``.

``mode``: ``online`` sends to the W&B server (``WANDB_API_KEY`` in the environment, or a ``wandb
login``); ``offline`` writes the run under ``<job dir>/wandb/offline-run-*`` for ``wandb sync``
later, from a machine that can reach W&B. The key is read by wandb itself from the environment;
we never read, pass or write it.

Stdlib only (``wandb`` imported when an export runs), Python 3.8 syntax.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from nemo_gym.orchestration.exporters import record as r

MODES = ("online", "offline")
DEFAULT_MODE = "online"
DEFAULT_PROJECT = "nemo-gym"
RUN_ID_LIMIT = 64
ARTIFACT_TYPE = "rollouts"
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9._-]")


def wandb_run_id(export_key: str) -> str:
    """``gym-job-...-2cedc5/answer-judge`` -> ``gym-job-...-2cedc5--answer-judge``: readable, and free
    of the characters W&B refuses in an id (``/ : ; , # ? '``); a long key keeps a hash of itself."""
    run_id, _, benchmark = export_key.partition("/")
    text = _UNSAFE_ID_CHARS.sub("_", f"{run_id}--{benchmark}" if benchmark else run_id)
    if len(text) > RUN_ID_LIMIT:
        digest = hashlib.sha1(export_key.encode()).hexdigest()[:10]
        text = text[: RUN_ID_LIMIT - len(digest) - 1] + "-" + digest
    return text


def import_wandb() -> Any:
    try:
        import wandb  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        version = ".".join(str(v) for v in sys.version_info[:2])
        raise r.ExportError(
            f"the wandb library is not installed for {sys.executable} (Python {version}): install it there "
            f"({sys.executable} -m pip install --user wandb, or in the job's environment), or export from a "
            "machine that has it with: gym eval export RUN --to wandb"
        ) from None
    return wandb


def run_config(record: r.ExportRecord) -> dict[str, Any]:
    config: dict[str, Any] = {f"gym.{k}": v for k, v in record.identity().items()}
    config.update(record.params)
    return config


def run_summary(record: r.ExportRecord) -> dict[str, Any]:
    summary: dict[str, Any] = dict(record.metrics)
    summary.update(record.summary_metrics())
    summary["gym/state"] = str(record.state)  # the word: W&B writes an Enum by its name
    summary["gym/complete"] = record.complete
    return summary


def export_to_wandb(
    record: r.ExportRecord, settings: dict[str, Any], on_run_id: Callable[[str], None], job_dir: str, wandb: Any = None
) -> r.ExportOutcome:
    mode = str(settings.get("mode") or DEFAULT_MODE)
    if mode not in MODES:
        raise r.ExportError(f"wandb mode {mode!r} is not one of {', '.join(MODES)}")
    wandb = wandb or import_wandb()
    run_id = wandb_run_id(record.export_key)
    on_run_id(run_id)
    try:
        run = wandb.init(
            project=str(settings.get("project") or DEFAULT_PROJECT),
            entity=settings.get("entity") or None,
            group=settings.get("group") or None,
            name=record.export_key,
            id=run_id,
            resume="allow",
            mode=mode,
            dir=job_dir,
            job_type="eval",
            tags=[record.benchmark],
            config=run_config(record),
            settings=wandb.Settings(silent=True, console="off"),
        )
        try:
            if record.step is not None:
                # The checkpoint's training step: W&B draws the metrics across a sweep's runs.
                run.log(dict(record.metrics), step=record.step)
            run.summary.update(run_summary(record))
            if record.rollouts_path:
                artifact = wandb.Artifact(f"rollouts-{run_id}", type=ARTIFACT_TYPE)
                artifact.add_file(record.rollouts_path, name=os.path.basename(record.rollouts_path))
                run.log_artifact(artifact)
            where = run.dir
        finally:
            run.finish()
    except r.ExportError:
        raise
    except Exception as exc:  # wandb's own errors: many types, one line each for the receipt
        raise r.ExportError(f"wandb: {type(exc).__name__}: {' '.join(str(exc).split())[:200]}") from None
    if mode == "offline":
        run_dir = os.path.dirname(where.rstrip("/"))
        return r.ExportOutcome(run_id, f"offline run {run_id} in {run_dir}: `wandb sync {run_dir}` uploads it")
    return r.ExportOutcome(run_id, f"run {run_id} in project {settings.get('project') or DEFAULT_PROJECT}")
