"""Runs for the view's tests: the real quickstart run (tests/data/quickstart-run) copied as a sweep
of three checkpoints with rewards that rise (tests/checkpoint_runs.py), recorded in the local index
as a sweep, each run with its own id and its checkpoint as its swept value."""

from __future__ import annotations

import json
from pathlib import Path

from checkpoint_runs import BENCH, checkpoint_runs

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.record import (
    SweepRecord,
    SweepRun,
    load_record,
    write_local_index,
    write_sweep_index,
)

SWEEP_ID = "gym-sweep-20261201T000000Z-5eed00"
KEY = "services.policy.model"


def indexed_sweep(root: Path, benchmark: str = BENCH) -> tuple[str, list[str]]:
    """The sweep's id and its runs' ids (step-1000, -2000, -3000), in the index of XDG_CACHE_HOME."""
    run_ids = []
    runs = []
    for i, run_dir in enumerate(checkpoint_runs(root)):
        record = load_record((run_dir / contract.RECORD_FILE).read_text())
        run_id = f"gym-job-20261201T00000{i}Z-5eed0{i}"
        if benchmark != BENCH:
            (run_dir / BENCH).rename(run_dir / benchmark)
        jobs = [
            b.model_copy(update={"benchmark": benchmark, "job_dir": str(run_dir / benchmark)})
            for b in record.benchmarks
        ]
        values = {KEY: f"/ckpt/{run_dir.name}"}
        record = record.model_copy(
            update={
                "gym_job_id": run_id,
                "run_dir": str(run_dir),
                "sweep_id": SWEEP_ID,
                "sweep_values": values,
                "model": values[KEY],
                "benchmarks": jobs,
            }
        )
        (run_dir / contract.RECORD_FILE).write_text(record.dumps())
        write_local_index(record)
        run_ids.append(run_id)
        runs.append(SweepRun(run_id=run_id, run_dir=str(run_dir), values=values))
    write_sweep_index(
        SweepRecord(
            sweep_id=SWEEP_ID,
            submitted_at="2026-12-01T00:00:00Z",
            submitted_by="me",
            config="/eval.yaml",
            swept=[KEY],
            executor="local",
            hostname=None,
            runs=runs,
        )
    )
    return SWEEP_ID, run_ids


def hostile_rows(path: Path, text: str) -> None:
    """Every row's response and a field of gym's made to hold ``text``."""
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for row in rows:
        row["response"]["output"][0]["content"][0]["text"] = text
        row["expected_judgement"] = text
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
