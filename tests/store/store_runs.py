"""Real run directories for the store's tests: the quickstart's NeMo Gym run (tests/data/quickstart-run)
copied, given its own run id, model, sweep and submit time, its one benchmark copied under other
names, and each benchmark's per-task rewards set as the test says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.chain import chain_record
from nemo_gym.orchestration.verbs.resubmit.recovery import Remedy

REAL_RUN = Path(__file__).resolve().parents[1] / "data" / "quickstart-run"
REAL_BENCHMARK = "answer-judge"
REAL_JOB = "local-2cedc5-1"
TASKS = 12


def run_directory(
    where: Path,
    number: int,
    rewards: dict[str, list[float]],
    *,
    model: str | None = None,
    sweep_id: str | None = None,
    training_step: int | None = None,
    tags: list[str] | None = None,
    provenance: str | None = None,
    resubmitted: bool = False,
) -> Path:
    """Run number ``number`` (its id and submit time follow from it) under ``where``, its benchmarks
    the keys of ``rewards``, each task's reward the list's. ``resubmitted``: each benchmark's first
    job failed (its service died half-way) and ``gym eval resubmit`` queued a second, which ended
    it as the real job did, its records as resubmit and the local runner write them."""
    run_id = f"gym-job-20261201T{number // 3600:02d}{number // 60 % 60:02d}{number % 60:02d}Z-{number:06x}"
    run_dir = where / run_id
    shutil.copytree(REAL_RUN, run_dir)
    real = run_dir / REAL_BENCHMARK
    record = json.loads((run_dir / contract.RECORD_FILE).read_text())
    jobs = []
    for k, (benchmark, scores) in enumerate(rewards.items(), 1):
        if benchmark != REAL_BENCHMARK:
            shutil.copytree(real, run_dir / benchmark)
        _set_rewards(run_dir / benchmark / contract.ROLLOUTS_FILE, scores)
        job_id = f"local-{number:06x}-{k}"
        # The real job's own records (its state, its events: its wall time), under this job's id.
        (run_dir / benchmark / ".gym" / REAL_JOB).rename(run_dir / benchmark / ".gym" / job_id)
        if resubmitted:
            _resubmitted(run_dir / benchmark, job_id, rows=len(scores) // 2)
        if provenance is not None:
            (run_dir / benchmark / contract.PROVENANCE_FILE).write_text(provenance)
        jobs.append({"benchmark": benchmark, "job_dir": str(run_dir / benchmark), "job_id": job_id})
    if REAL_BENCHMARK not in rewards:
        shutil.rmtree(real)
    record.update(gym_job_id=run_id, run_dir=str(run_dir), benchmarks=jobs, model=model, sweep_id=sweep_id)
    record["submitted_at"] = (
        f"2026-12-01T{number // 3600:02d}:{number // 60 % 60:02d}:{number % 60:02d}.{number % 1000:03d}Z"
    )
    (run_dir / contract.RECORD_FILE).write_text(json.dumps(record))
    if training_step is not None or tags is not None:
        job = {"training_step": training_step, "tags": tags or []}
        (run_dir / contract.RESOLVED_CONFIG_FILE).write_text(json.dumps({"job": job}))  # JSON is YAML
    return run_dir


def _resubmitted(job_dir: Path, first: str, rows: int) -> None:
    """The job ``first`` failed with ``rows`` rows written; its second attempt (the local backend's
    id ``first.2``) holds the real job's records and ended it."""
    gym = job_dir / ".gym"
    second = f"{first}.2"
    (gym / first).rename(gym / second)
    state = (gym / second / contract.STATE_FILE).read_text().replace("attempt=1", "attempt=2")
    (gym / second / contract.STATE_FILE).write_text(state)
    (gym / first).mkdir()
    (gym / first / contract.STATE_FILE).write_text(
        "phase=failed\ndetail=service policy died while the driver ran\ntime=2026-11-30T21:40:00Z\nattempt=1\n"
    )
    (gym / first / "cause").write_text(f"{contract.Cause.SERVICE_DIED}\n")
    record = chain_record(contract.RECORD_RESUBMIT, second, first, 2, Remedy.REQUEUE.value, rows)
    with (job_dir / contract.CHAIN_FILE).open("a") as chain:
        chain.write(record)


def _set_rewards(rollouts: Path, scores: list[float]) -> None:
    """The real rows, rewarded as ``scores`` says; for another number of tasks than the real run's,
    a row per task made from the real first row (its long request and response cut short, so a
    thousand-task benchmark stays small), and the expected samples' list to match."""
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    if len(scores) != TASKS:
        inputs = rollouts.parents[1] / contract.MATERIALIZED_INPUTS_FILE
        expected = json.loads(inputs.read_text().splitlines()[0])
        _write_rows(inputs, [{**_short(expected), "_ng_task_index": t} for t in range(len(scores))])
        rows = [{**_short(rows[0]), "_ng_task_index": t} for t in range(len(scores))]
    _write_rows(rollouts, [{**row, "reward": scores[row["_ng_task_index"]]} for row in rows])


def _short(row: dict[str, object]) -> dict[str, object]:
    return {key: ({"cut": str(value)[:80]} if key.startswith("response") else value) for key, value in row.items()}


def _write_rows(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))


def scoring(ones: int) -> list[float]:
    """Rewards of 1 on the first ``ones`` tasks, 0 on the rest: a mean of ones / 12."""
    return [1.0 if task < ones else 0.0 for task in range(TASKS)]
