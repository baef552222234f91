"""gym eval export to a destination named on the command line (--to NAME --tracking-uri URL, ...):
a run submitted without job.export reaches MLflow and a table after the fact, its spec made here
from its record and resolved config; a sweep exports every run; an unknown --to is an error."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest
import yaml
from export_jobs import BENCHMARK, QUICKSTART_RUN, RUN_ID
from fakes.fake_mlflow import FakeMlflowServer

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.cli import main as cli
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord, write_local_index

OTHER_RUN = "gym-job-20261130T215100Z-aaaaaa"


@pytest.fixture(autouse=True)
def no_tracking_credentials(monkeypatch) -> None:
    for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "WANDB_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def unexported_run(root: Path, run_id: str = RUN_ID, sweep_id: str | None = None, step: int | None = None) -> Path:
    """A finished run on this machine, submitted without job.export: no spec in its job directory."""
    run_dir = root / run_id
    shutil.copytree(QUICKSTART_RUN / BENCHMARK, run_dir / BENCHMARK)
    config = {"services": {"policy": {"type": "vllm", "model": "/ckpt/tiny"}}, "job": {"training_step": step}}
    (run_dir / contract.RESOLVED_CONFIG_FILE).write_text(yaml.safe_dump(config))
    record = SubmissionRecord(
        gym_job_id=run_id,
        submitted_at="2026-11-30T21:50:59Z",
        run_dir=str(run_dir),
        cluster="here",
        executor="local",
        submitted_by="me",
        model="/ckpt/tiny",
        sweep_id=sweep_id,
        benchmarks=[BenchmarkJob(benchmark=BENCHMARK, job_dir=str(run_dir / BENCHMARK), job_id="local-2cedc5-1")],
    )
    (run_dir / contract.RECORD_FILE).write_text(record.dumps())
    write_local_index(record)
    return run_dir


def gym_eval_export(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(["eval", "export", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_a_run_submitted_without_exports_reaches_mlflow_after_the_fact(tmp_path, capsys) -> None:
    run_dir = unexported_run(tmp_path / "runs", step=1200)
    code, out = gym_eval_export(capsys, RUN_ID)
    assert code == 0 and "no exports are configured" in out  # as submitted: none
    with FakeMlflowServer() as server:
        code, out = gym_eval_export(capsys, RUN_ID, "--to", "mlflow", "--tracking-uri", server.url, "--experiment", "e")
        [run] = server.state.runs.values()
        artifacts = dict(server.state.artifacts)
    assert code == 0 and "export mlflow: done" in out, out
    assert run["tags"]["gym.export_key"] == f"{RUN_ID}/{BENCHMARK}" and run["status"] == "FINISHED"
    assert run["metrics"]["gym/samples_written"] == [12.0] and "mean/reward" in run["metrics"]
    assert set(run["metric_steps"]["mean/reward"]) == {1200}  # its training step, from its resolved config
    assert run["params"]["services.policy.model"] == "/ckpt/tiny"
    assert any(path.endswith("rollouts.jsonl") for path in artifacts)
    # The spec was made for the command and left nothing behind in the run directory.
    assert not (run_dir / BENCHMARK / "steps" / "exporters" / "export-spec.json").exists()


def test_another_destination_is_an_export_of_its_own_and_the_same_one_is_not_repeated(tmp_path, capsys) -> None:
    unexported_run(tmp_path / "runs")
    with FakeMlflowServer() as first, FakeMlflowServer() as second:
        assert gym_eval_export(capsys, RUN_ID, "--to", "mlflow", "--tracking-uri", first.url)[0] == 0
        code, out = gym_eval_export(capsys, RUN_ID, "--to", "mlflow", "--tracking-uri", first.url)
        assert code == 0 and "done already" in out
        assert gym_eval_export(capsys, RUN_ID, "--to", "mlflow", "--tracking-uri", second.url)[0] == 0
        assert len(first.state.runs) == 1 and len(second.state.runs) == 1


def test_a_sweep_exports_every_run_to_a_table(tmp_path, capsys) -> None:
    from nemo_gym.orchestration.record import SweepRecord, SweepRun, write_sweep_index

    sweep_id = "gym-sweep-20261130T215100Z-bbbbbb"
    dirs = [unexported_run(tmp_path / "runs", run_id, sweep_id) for run_id in (RUN_ID, OTHER_RUN)]
    write_sweep_index(
        SweepRecord(
            sweep_id=sweep_id,
            submitted_at="2026-11-30T21:51:00Z",
            submitted_by="me",
            config="/c.yaml",
            swept=["services.policy.model"],
            executor="local",
            hostname=None,
            runs=[SweepRun(run_id=d.name, run_dir=str(d), values={}) for d in dirs],
        )
    )
    table = tmp_path / "table"
    code, out = gym_eval_export(capsys, sweep_id, "--to", "table", "--dir", str(table))
    assert code == 0, out
    rows = list(csv.DictReader((table / "results.csv").open()))
    assert sorted(r["run_id"] for r in rows) == sorted([RUN_ID, OTHER_RUN])


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--to", "mlfow"], "--to mlfow: no such exporter; gym eval export knows mlflow, wandb, table"),
        (["--tracking-uri", "http://x"], "--tracking-uri is a setting of the mlflow exporter; add --to mlflow"),
        (["--to", "table", "--dir", "relative/dir"], "gym eval export: export.table.dir:"),
    ],
)
def test_a_wrong_destination_is_refused_in_one_line_before_anything_is_sent(tmp_path, capsys, args, says) -> None:
    unexported_run(tmp_path / "runs")
    code, out = gym_eval_export(capsys, RUN_ID, *args)
    assert code == 1 and says in out, out
