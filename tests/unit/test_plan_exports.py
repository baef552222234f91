"""Exports in the plan: which benchmark exports where, what credentials travel, what is staged."""

from __future__ import annotations

import copy
import json
import warnings

from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.plan.building import build_plan
from nemo_gym.orchestration.render import render_run
from nemo_gym.orchestration.verbs.submit.use_case import submission_secrets

BASE = {
    "services": {"policy": {"type": "vllm", "container": "c", "model": "/m/step-10", "served_model_name": "s"}},
    "compute": {"c": {"type": "slurm", "account": "a"}},
    "driver": {
        "policy_model": "policy",
        "benchmarks": {"a": {}, "b": {"export": {"table": None, "wandb": {"project": "p"}}}},
    },
    "job": {"output_path": "/runs", "export": {"mlflow": {"tracking_uri": "http://m:5000"}, "table": {"dir": "/t"}}},
    "otel": {"enabled": False},
}


def plan_of(data: dict, sweep_id: str | None = None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = SubmitConfig.model_validate(data)
    return config, build_plan(config, "gym-job-20260101T000000Z-000000", sweep_id)


def test_each_benchmark_exports_what_job_export_and_its_own_export_say() -> None:
    _, plan = plan_of(copy.deepcopy(BASE), sweep_id="gym-sweep-x")
    a, b = plan.jobs
    assert a.export.exporters == ("mlflow", "table") and b.export.exporters == ("mlflow", "wandb")
    assert a.export.spec["sweep_id"] == "gym-sweep-x" and a.export.spec["served_name"] == "s"
    assert a.export.spec["params"]["services.policy.model"] == "/m/step-10"


def test_credentials_travel_in_the_submissions_environment_only_when_set(monkeypatch) -> None:
    config, plan = plan_of(copy.deepcopy(BASE))
    assert plan.carried_env == (
        "MLFLOW_TRACKING_TOKEN",
        "MLFLOW_TRACKING_USERNAME",
        "MLFLOW_TRACKING_PASSWORD",
        "WANDB_API_KEY",
    )
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-123")
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    secrets = submission_secrets(config, plan)
    assert secrets["MLFLOW_TRACKING_TOKEN"] == "tok-123" and "WANDB_API_KEY" not in secrets
    staged = render_run(plan)
    assert all("tok-123" not in f.content for f in staged.files.values())
    spec = json.loads(staged.files["a/steps/exporters/export-spec.json"].content)
    assert spec["exporters"]["mlflow"] == {"tracking_uri": "http://m:5000"}


def test_no_export_no_exporters_staged_and_no_credentials_carried() -> None:
    data = copy.deepcopy(BASE)
    data["job"]["export"] = {}
    data["driver"]["benchmarks"]["b"].pop("export")
    _, plan = plan_of(data)
    assert plan.carried_env == () and all(job.export is None for job in plan.jobs)
    assert not [rel for rel in render_run(plan).files if "exporters" in rel]
    assert "gym_export" not in render_run(plan).job_script("a")
