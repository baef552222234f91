"""Exports of a benchmark's results to MLflow, Weights & Biases and a shared table, run by the job
itself after its driver and by ``gym eval export`` later, each export once (receipts, and a
deterministic key in every backend).

The modules listed in ``NODE_MODULES`` are stdlib only and Python 3.8 syntax: a job stages them,
with ``contract.py``, ``untrusted.py`` and ``facts.py``, as ``steps/exporters/`` and runs ``python3 steps/exporters/run_exports.py``
(see ``run_exports``). This ``__init__`` is the submitting side's only: it lists what to stage, and
what ``gym eval export`` ships in its script (``export_runs``: the installed modules, never the
copy staged in a run directory).
"""

from __future__ import annotations

from importlib import resources

from nemo_gym.orchestration.exporters.receipts import EXPORTS_DIR, RUNNER, SPEC_FILE, STAGED_DIR

# The node-side modules, imported by each other as siblings once staged.
NODE_MODULES = ("record", "spec", "jobfiles", "receipts", "mlflow_rest", "table", "wandb_export", "run_exports")
# The package's own modules the exporters import, staged beside them.
SHARED_MODULES = ("contract", "untrusted", "facts")
__all__ = ["EXPORTS_DIR", "NODE_MODULES", "RUNNER", "SHARED_MODULES", "SPEC_FILE", "STAGED_DIR", "staged_files"]


def staged_files() -> dict[str, str]:
    """Job-directory path -> source of every file a job needs to run its exports (the spec aside)."""
    files = {
        f"{STAGED_DIR}/{name}.py": resources.files(__name__).joinpath(f"{name}.py").read_text() for name in NODE_MODULES
    }
    package = resources.files("nemo_gym.orchestration")
    files.update({f"{STAGED_DIR}/{name}.py": package.joinpath(f"{name}.py").read_text() for name in SHARED_MODULES})
    return files
