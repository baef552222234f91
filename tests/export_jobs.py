"""Job directories with their exports staged as a job stages them: for the exporters' tests.

A job directory here is a copy of the real quickstart run's benchmark (tests/data/quickstart-run:
12 tasks x 1 rollout, gym's aggregate metrics, the job's events), with the exporters shipped as a
job has them (``shipping.staged``) and an export spec written by ``make_spec``, exactly what
``run_exports.py`` finds in a job. Running it with a python that cannot import our
package (another interpreter, ``-E -s``) shows that the compute node does not need it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from nemo_gym.orchestration import shipping
from nemo_gym.orchestration.exporters import receipts, spec
from nemo_gym.orchestration.shipping import Program

REPO = Path(__file__).resolve().parent.parent
QUICKSTART_RUN = REPO / "tests" / "data" / "quickstart-run"
RUN_ID = "gym-job-20261130T215059Z-2cedc5"
BENCHMARK = "answer-judge"
CONFIG = {
    "services": {"policy": {"type": "vllm", "model": "tiny-random", "args": ["--max-model-len", "2048"]}},
    "driver": {"benchmarks": {BENCHMARK: {"run": {"limit": 12}}}},
    "job": {"output_path": "/scratch/runs"},
}


def staged_job(
    root: Path,
    exporter_settings: dict[str, dict[str, Any]],
    run_id: str = RUN_ID,
    benchmark: str = BENCHMARK,
    gpus: int | None = 1,
) -> Path:
    """``root/<run id>/<benchmark>``: a finished job directory with its exports staged."""
    job = root / run_id / benchmark
    shutil.copytree(QUICKSTART_RUN / BENCHMARK, job)
    for rel, text in shipping.staged(Program.EXPORTERS).items():
        (job / rel).parent.mkdir(parents=True, exist_ok=True)
        (job / rel).write_text(text)
    document = spec.make_spec(run_id, benchmark, "tiny-random", "policy", CONFIG, exporter_settings, gpus=gpus)
    (job / receipts.SPEC_FILE).parent.mkdir(parents=True, exist_ok=True)
    spec.write_spec(str(job / receipts.SPEC_FILE), document)
    return job


def run_staged(
    job: Path, python: str, *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """The staged runner, as the job runs it (``shipping.launch_words``, with ``python``):
    ``-E -s``: no PYTHONPATH, no user site: only the staged files and the interpreter's own packages."""
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "WANDB_"))}
    full_env.update(env or {})
    return subprocess.run(
        [python, *shipping.launch_words(Program.EXPORTERS, tree=str(job)).split()[1:], str(job), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        cwd=str(job.parent),
    )


def receipt(job: Path, exporter: str) -> receipts.Receipt | None:
    return receipts.read_receipt(str(job), exporter)
