"""Exports of a benchmark's results to MLflow, Weights & Biases and a shared table, run by the job
itself after its driver and by ``gym eval export`` later, each export once (receipts, and a
deterministic key in every backend).

The modules of this package are stdlib only and Python 3.8 syntax: a job runs them from its
shipped tree (``shipping.Program.EXPORTERS``), ``gym eval export`` ships them inline in its script
(the installed modules, never a copy found in a run directory). Nothing of this ``__init__`` is
shipped: it only names what the submitting side reads.
"""

from __future__ import annotations

from nemo_gym.orchestration.exporters.receipts import EXPORTS_DIR, SPEC_FILE

__all__ = ["EXPORTS_DIR", "SPEC_FILE"]
