"""A run directory's export spec is data, not the user's word: ``gym eval export`` sends this shell's
credentials only to a destination the user chose (the one their own local index recorded at submit,
or one named with ``--trust-destination``), and every spec read back is checked again by the rules
of submit, in the job and in ``gym eval export``, before any request."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from export_jobs import BENCHMARK, RUN_ID, receipt, run_staged, staged_job
from fakes.fake_mlflow import FakeMlflowServer

from nemo_gym.orchestration import exporters
from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.cli import main as cli
from nemo_gym.orchestration.exporters import record as rec
from nemo_gym.orchestration.exporters import spec
from nemo_gym.orchestration.exporters.run_exports import Chosen
from nemo_gym.orchestration.plan.building import build_plan
from nemo_gym.orchestration.record import BenchmarkJob, SubmissionRecord, write_local_index
from nemo_gym.orchestration.submission import QueuedJob
from nemo_gym.orchestration.verbs.submit.use_case import _record as make_record

TOKEN = "tok-SENTINEL-d35t1n4t10n"


@pytest.fixture(autouse=True)
def no_tracking_credentials(monkeypatch) -> None:
    for name in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "WANDB_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def the_record(job: Path, export_to: dict[str, str]) -> SubmissionRecord:
    return SubmissionRecord(
        gym_job_id=RUN_ID,
        submitted_at="2026-11-30T21:50:59Z",
        run_dir=str(job.parent),
        cluster="local",
        executor="local",
        submitted_by="me",
        benchmarks=[BenchmarkJob(benchmark=BENCHMARK, job_dir=str(job), job_id="1", export_to=export_to)],
    )


def run_directory(tmp_path: Path, uri: str, index_says: str | None) -> Path:
    """A run directory exporting to ``uri``, with its own record; ``index_says``: the destination the
    user's index recorded for the run (None: not the user's run: a colleague's, read where it lies)."""
    job = staged_job(tmp_path / "runs", {"mlflow": {"tracking_uri": uri}})
    (job.parent / "gym-job.json").write_text(the_record(job, {"mlflow": uri}).dumps())  # believed by nobody
    if index_says is not None:
        write_local_index(the_record(job, {"mlflow": index_says}))
    return job


def edit_spec(job: Path, **mlflow: Any) -> None:
    """What a planter (or a careless hand) does to the run directory's spec."""
    path = job / exporters.SPEC_FILE
    document = json.loads(path.read_text())
    document["exporters"]["mlflow"] = dict(mlflow)
    path.write_text(json.dumps(document))


def gym_eval_export(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(["eval", "export", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def tokens_sent(server: FakeMlflowServer) -> set[str | None]:
    return {headers.get("Authorization") for _, _, headers, _ in server.state.requests}


# -- gym eval export sends credentials only where the user chose -----------------------------------------


def test_a_planted_destination_receives_no_request_and_the_recorded_one_still_works(
    tmp_path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    with FakeMlflowServer() as mine, FakeMlflowServer() as planted:
        job = run_directory(tmp_path, mine.url, index_says=mine.url)
        edit_spec(job, tracking_uri=planted.url + "/")
        code, out = gym_eval_export(capsys, str(job.parent))
        assert planted.state.requests == [] and mine.state.requests == []
        assert code == 1 and TOKEN not in out
        assert (
            f"refused to send your credentials to {planted.url} ({exporters.SPEC_FILE} exporters.mlflow.tracking_uri)"
            in out
        )
        assert f"your local index records {mine.url} for this run" in out
        assert f"rerun gym eval export with --trust-destination {planted.url}" in out and len(out.splitlines()) == 1
        assert receipt(job, "mlflow") is None  # nothing written into a run directory that may not be ours

        edit_spec(job, tracking_uri=mine.url)  # the spec as submitted
        code, out = gym_eval_export(capsys, RUN_ID)
        assert code == 0 and "export mlflow: done (first export)" in out, out
        assert tokens_sent(mine) == {f"Bearer {TOKEN}"} and planted.state.requests == []


def test_a_colleagues_run_directory_goes_to_its_destination_only_when_named(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    with FakeMlflowServer() as theirs:
        job = run_directory(tmp_path, theirs.url, index_says=None)  # its record claims it: not believed
        code, out = gym_eval_export(capsys, str(job.parent))
        assert code == 1 and theirs.state.requests == []
        assert "your local index records no such destination" in out and TOKEN not in out
        code, out = gym_eval_export(capsys, str(job.parent), "--trust-destination", theirs.url)
        assert code == 0 and "export mlflow: done" in out, out
        assert tokens_sent(theirs) == {f"Bearer {TOKEN}"}


def test_without_credentials_a_run_directorys_destination_is_exported_to_with_none(tmp_path, capsys) -> None:
    # Documented choice: nothing of the user's is sent, so nothing is refused.
    with FakeMlflowServer() as theirs:
        job = run_directory(tmp_path, theirs.url, index_says=None)
        code, out = gym_eval_export(capsys, str(job.parent))
        assert code == 0 and "export mlflow: done" in out, out
        assert theirs.state.requests and tokens_sent(theirs) == {None}


def recorded(**export_to: str) -> Chosen:
    return Chosen(export_to, [], {"WANDB_API_KEY": TOKEN, "MLFLOW_TRACKING_TOKEN": TOKEN})


def test_wandbs_entity_and_project_are_a_destination_too() -> None:
    chosen = recorded(wandb="team/evals")
    problem = chosen.problem("wandb", {"entity": "them", "project": "loot"})
    assert problem is not None and problem.startswith("refused to send your credentials to them/loot (")
    assert "exporters.wandb.entity/project" in problem and "your local index records team/evals" in problem
    assert chosen.problem("wandb", {"entity": "team", "project": "evals", "mode": "online"}) is None
    assert chosen.problem("wandb", {"entity": "them", "project": "loot", "mode": "offline"}) is None  # sends nothing
    assert (
        Chosen({}, ["them/loot"], {"WANDB_API_KEY": TOKEN}).problem("wandb", {"entity": "them", "project": "loot"})
        is None
    )


def test_the_table_and_an_address_from_the_environment_carry_nothing_to_refuse() -> None:
    chosen = recorded(table="/mine", mlflow="http://mine:5000")
    assert chosen.problem("table", {"dir": "/elsewhere"}) is None  # no credential; never over a non-table file
    assert chosen.problem("mlflow", {"experiment": "e"}) is None  # this shell's MLFLOW_TRACKING_URI: the user's
    assert chosen.problem("mlflow", {"tracking_uri": "HTTP://Mine:5000/"}) is None  # the same address
    assert Chosen({}, [], {}).problem("mlflow", {"tracking_uri": "http://other:5000"}) is None  # no token here


def test_the_submit_records_each_benchmarks_destinations_in_the_index() -> None:
    data = {
        "services": {"policy": {"type": "vllm", "container": "c", "model": "/m/step-10", "served_model_name": "s"}},
        "compute": {"c": {"type": "slurm", "account": "a"}},
        "driver": {"policy_model": "policy", "benchmarks": {"a": {}, "b": {"export": {"mlflow": None}}}},
        "job": {
            "output_path": "/runs",
            "export": {"mlflow": {"tracking_uri": "http://m:5000/"}, "table": {"dir": "/t"}},
        },
        "otel": {"enabled": False},
    }
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan = build_plan(SubmitConfig.model_validate(data), RUN_ID)
    record = make_record(plan, [QueuedJob("a", "1", None), QueuedJob("b", "2", None)])
    assert {job.benchmark: job.export_to for job in record.benchmarks} == {
        "a": {"mlflow": "http://m:5000", "table": "/t"},
        "b": {"table": "/t"},
    }


# -- every spec read back is checked by the rules of submit -----------------------------------------------

EDITS = {"userinfo": "http://me:pw-SECRET@{host}", "token query": "http://{host}/?token=pw-SECRET"}


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_spec_edited_to_hold_credentials_is_refused_in_the_job(tmp_path: Path, edit: str) -> None:
    with FakeMlflowServer() as server:
        job = staged_job(tmp_path, {"mlflow": {"tracking_uri": server.url}})
        edit_spec(job, tracking_uri=EDITS[edit].format(host=server.url.split("//", 1)[1]))
        done = run_staged(job, sys.executable, env={"MLFLOW_TRACKING_TOKEN": TOKEN})
        assert server.state.requests == []
    [line] = done.stdout.splitlines()
    assert done.returncode == 0 and not done.stderr
    assert (
        f"FAILED: the export spec {job / exporters.SPEC_FILE}: exporters.mlflow.tracking_uri: holds credentials" in line
    )
    assert "pw-SECRET" not in line and TOKEN not in line and "(nothing exported;" in line


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_a_spec_edited_to_hold_credentials_is_refused_by_gym_eval_export(
    tmp_path, monkeypatch, capsys, edit: str
) -> None:
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", TOKEN)
    with FakeMlflowServer() as server:
        uri = EDITS[edit].format(host=server.url.split("//", 1)[1])
        job = run_directory(tmp_path, server.url, index_says=uri)  # even where the index said so
        edit_spec(job, tracking_uri=uri)
        code, out = gym_eval_export(capsys, RUN_ID, "--trust-destination", uri)
        assert server.state.requests == []
    assert code == 1 and "exporters.mlflow.tracking_uri: holds credentials" in out and "(nothing exported;" in out
    assert "pw-SECRET" not in out and TOKEN not in out


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [
        ("params", ["a"], "params: must be a mapping"),
        ("params_notes", 3, "params_notes: must be a list"),
        ("usage_dir", {"x": 1}, "usage_dir: must be a string"),
    ],
)
def test_a_spec_of_the_wrong_shape_is_one_line_naming_the_field(field: str, value: Any, problem: str) -> None:
    data = {"version": 1, "run_id": "r", "benchmark": "b", "exporters": {"table": {"dir": "/t"}}, field: value}
    with pytest.raises(rec.ExportError) as err:
        spec.parse_spec(data, "the export spec /j/export-spec.json")
    assert str(err.value) == f"the export spec /j/export-spec.json: {problem}"


def test_an_address_from_the_environment_is_checked_by_the_same_rules(tmp_path: Path) -> None:
    with FakeMlflowServer() as server:
        job = staged_job(tmp_path, {"mlflow": {"experiment": "e"}})
        env = {"MLFLOW_TRACKING_TOKEN": TOKEN, "MLFLOW_TRACKING_URI": server.url + "/?token=pw-SECRET"}
        done = run_staged(job, sys.executable, env=env)
        assert server.state.requests == []
    [line] = done.stdout.splitlines()
    assert (
        "export mlflow: FAILED: MLFLOW_TRACKING_URI (the address, as the mlflow exporter's settings have none): "
        "holds credentials in its query (?token=...)" in line
    )
    assert "pw-SECRET" not in line and TOKEN not in line
