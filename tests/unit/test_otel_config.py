"""The collector config of a job: what it scrapes, where it sends, and that it never holds a token."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import pytest
import yaml
from otel_checker import check_collector_config

from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.compose import compose_config
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.otel import collector_env_names, render_collector_config, validate_destination
from nemo_gym.orchestration.plan.building import build_plan
from nemo_gym.orchestration.plan.model import (
    Launch,
    NodeSlice,
    PlainStep,
    RunPlan,
    Step,
    VllmDataParallelStep,
    VllmRayStep,
)
from nemo_gym.orchestration.plan.telemetry import metrics_nodes

REPO = Path(__file__).resolve().parents[2]
RUN_ID = "gym-job-20260101T000000Z-abcdef"
TOKEN = "otel-token-s3cret-value"
HF_TOKEN = "hf-secret-of-a-service"
# gym_telemetry off: these tests are about the collector, and have no driver.gym_install to install gym's.
DESTINATION = {
    "enabled": True,
    "endpoint": "https://otel.example.com",
    "service_name": "gym-evals",
    "gym_telemetry": False,
}


def _validated(data: dict[str, Any]) -> SubmitConfig:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # idle-GPU warnings are not what these tests are about
        return SubmitConfig.model_validate(data)


def _with_otel(data: dict[str, Any], **otel: Any) -> SubmitConfig:
    data = copy.deepcopy(data)
    data["otel"] = {**DESTINATION, **otel}
    return _validated(data)


def _example(name: str, **otel: Any) -> SubmitConfig:
    return _with_otel(compose_config(REPO / name, []), **otel)


def _render(config: SubmitConfig, job: int = 0) -> tuple[str, dict[str, Any], RunPlan]:
    plan = build_plan(config, RUN_ID)
    text = render_collector_config(plan.run_id, plan.jobs[job])
    return text, yaml.safe_load(text), plan


def _scrapes(doc: dict[str, Any]) -> dict[str, list[tuple[str, dict[str, str]]]]:
    """job_name -> [(target, labels)] of the prometheus receiver."""
    out: dict[str, list[tuple[str, dict[str, str]]]] = {}
    for sc in doc["receivers"]["prometheus"]["config"]["scrape_configs"]:
        out[sc["job_name"]] = [(t, s["labels"]) for s in sc["static_configs"] for t in s["targets"]]
    return out


def _env_refs(text: str) -> set[str]:
    return set(re.findall(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)\}", text))


@pytest.fixture(autouse=True)
def _token_and_envs(monkeypatch) -> None:
    monkeypatch.setenv("OTEL_TOKEN", TOKEN)
    monkeypatch.setenv("GYM_ENVS_DIR", "/opt/gym-envs")  # read by the quickstart examples
    monkeypatch.setenv("GOLDEN_HF_TOKEN", HF_TOKEN)  # a host: secret of the golden configs


# -- every config that can be planned renders a sound config -----------------------------------

CONFIGS = [
    "examples/multi-node-pools.yaml",
    "examples/single-node.yaml",
    "examples/quickstart.yaml",
    "examples/quickstart-slurm.yaml",
    # Not Kubernetes': it refuses otel (the collector's token cannot reach a pod yet).
    *sorted(str(p.relative_to(REPO)) for p in (REPO / "tests/golden/configs").glob("*.yaml") if p.stem != "kubernetes"),
]


@pytest.mark.parametrize("name", CONFIGS)
def test_rendered_config_passes_the_structural_check(name) -> None:
    config = _example(name)
    plan = build_plan(config, RUN_ID)
    for job in plan.jobs:
        text = render_collector_config(plan.run_id, job)
        assert check_collector_config(text, secrets=[TOKEN, HF_TOKEN]) == []
        assert TOKEN not in text and HF_TOKEN not in text
        doc = yaml.safe_load(text)
        assert doc["exporters"]["otlphttp"]["headers"] == {"Authorization": "Bearer ${env:OTEL_TOKEN}"}
        assert {s: doc["exporters"][f"file/{s}"]["path"] for s in ("metrics", "traces", "logs")} == {
            s: f"{job.job_dir}/otel/{s}.jsonl" for s in ("metrics", "traces", "logs")
        }
        # The env contract: the header lists exactly what the YAML reads, node vars for every node.
        assert _env_refs(text) == set(collector_env_names(job))
        assert {f"GYM_NODE_{i}" for i in range(job.node_count)} <= _env_refs(text)


def test_the_multi_node_example_has_otel_on_and_renders() -> None:
    raw = compose_config(REPO / "examples/multi-node-pools.yaml", [])
    config = _validated(raw)
    assert config.otel.enabled
    plan = build_plan(config, RUN_ID)
    text = render_collector_config(plan.run_id, plan.jobs[1])
    assert check_collector_config(text) == []
    attributes = yaml.safe_load(text)["processors"]["resource"]["attributes"]
    assert {"key": "benchmark", "value": "livecodebench", "action": "upsert"} in attributes


# -- scrape targets --------------------------------------------------------------------------------


def test_metrics_ports_are_scraped_on_every_node_of_the_allocation() -> None:
    _, doc, plan = _render(_example("examples/multi-node-pools.yaml"))
    scrapes = _scrapes(doc)
    assert plan.jobs[0].node_count == 3
    for job_name, port in (("dcgm", 9400), ("node", 9100)):
        assert [(t, labels["gym_node"]) for t, labels in scrapes[job_name]] == [
            (f"${{env:GYM_NODE_{i}}}:{port}", str(i)) for i in range(3)
        ]


def test_a_data_parallel_service_is_scraped_where_its_api_server_runs() -> None:
    # `serve` is the second pool (nodes 1-2): the head on node 1 serves the API, node 2 runs
    # headless ranks with no HTTP server, so scraping it would only ever report it down.
    config = _example("tests/golden/configs/dp-multi-node.yaml")
    _, doc, plan = _render(config)
    step = next(s for s in plan.jobs[0].steps if s.service == "policy")
    assert step.kind == "vllm-dp" and step.nodes == NodeSlice(1, 2)
    assert _scrapes(doc)["gym-vllm/policy"] == [
        ("${env:GYM_NODE_1}:8000", {"gym_component": "gym-vllm", "gym_service": "policy", "gym_node": "1"})
    ]
    # ...and both nodes of its pool still report GPU and host metrics.
    assert {labels["gym_node"] for _, labels in _scrapes(doc)["dcgm"]} >= {"1", "2"}
    # The ray service has no /metrics of its own to scrape.
    assert not any(name.endswith("/envs") for name in _scrapes(doc))


def test_metrics_nodes_follow_the_step_kind() -> None:
    def step(kind: type, start: int, count: int, **more) -> Step:
        nodes = NodeSlice(start, count)
        return kind(
            name="p",
            service="p",
            nodes=nodes,
            env=(),
            pre_command="",
            argv=("vllm",),
            launch=Launch("p", "/j", nodes, None, (), False),
            **more,
        )

    assert metrics_nodes(step(PlainStep, 2, 1)) == (2,)
    assert metrics_nodes(step(PlainStep, 2, 2)) == (2, 3)  # a plain step serves on each of its nodes
    assert metrics_nodes(step(VllmDataParallelStep, 1, 2, worker_argv=(), ranks_per_node=1)) == (1,)
    assert metrics_nodes(step(VllmRayStep, 0, 2, ray_port=6390)) == (0,)


def test_each_model_service_gets_its_own_job_on_its_own_pool(base) -> None:
    base["compute"]["cluster"]["node_pools"] = {
        "a": {"partition": "p", "nodes": 1, "gpus_per_node": 1},
        "b": {"partition": "p", "nodes": 1, "gpus_per_node": 1},
    }
    base["services"]["policy"]["node_pool"] = "a"
    base["services"]["judge"] = {
        "type": "vllm",
        "container": "c",
        "model": "j",
        "node_pool": "b",
        "port": 8001,
    }
    config = _with_otel(base, component="evals")
    _, doc, _ = _render(config)
    scrapes = _scrapes(doc)
    assert scrapes["evals/policy"][0][0] == "${env:GYM_NODE_0}:8000"
    assert scrapes["evals/judge"] == [
        ("${env:GYM_NODE_1}:8001", {"gym_component": "evals", "gym_service": "judge", "gym_node": "1"})
    ]


def test_a_ray_backed_instance_is_scraped_on_its_head_only() -> None:
    _, doc, plan = _render(_example("tests/golden/configs/vllm-ray.yaml"))
    assert plan.jobs[0].steps[0].kind == "vllm-ray"
    assert [t for t, _ in _scrapes(doc)["gym-vllm/policy"]] == ["${env:GYM_NODE_0}:8000"]


def test_the_ray_gateway_is_scraped_with_ray_s_metrics_on_every_node_of_its_cluster() -> None:
    """Ray Serve's own metrics (its requests, latencies, replicas) come from Ray's metrics export
    port on each node of the gateway's cluster, where its step starts Ray."""
    _, doc, plan = _render(_example("tests/golden/configs/gateway.yaml"))
    [step] = plan.jobs[0].steps
    assert step.kind == "vllm-gateway"
    port = step.ray_metrics_port
    labels = {"gym_component": "gym-vllm", "gym_service": "policy", "gym_source": "ray"}
    assert _scrapes(doc)["gym-vllm/policy/ray"] == [
        (f"${{env:GYM_NODE_{i}}}:{port}", {**labels, "gym_node": str(i)}) for i in (0, 1)
    ]
    assert [t for t, _ in _scrapes(doc)["gym-vllm/policy"]] == ["${env:GYM_NODE_0}:8000"]  # the gateway's own


def test_local_quickstart_scrapes_its_claimed_port_on_this_machine() -> None:
    """The local quickstart claims its ports when it starts (two runs on this machine at once):
    the collector scrapes the policy's claimed port, named by the variable the job exports."""
    text, doc, plan = _render(_example("examples/quickstart.yaml"))
    assert plan.backend == "local"
    assert [t for t, _ in _scrapes(doc)["gym-vllm/policy"]] == ["${env:GYM_NODE_0}:${env:GYM_PORT_POLICY}"]
    assert "GYM_PORT_POLICY" in _env_refs(text) and "GYM_PORT_OTEL_HEALTH" in _env_refs(text)
    keys = [a["key"] for a in doc["processors"]["resource"]["attributes"]]
    assert "slurm_job_id" not in keys and "job_id" in keys
    assert "SLURM_JOB_ID" not in _env_refs(text)


def test_null_metric_ports_drop_the_dcgm_and_node_jobs() -> None:
    _, doc, _ = _render(_example("examples/multi-node-pools.yaml", gpu_metrics_port=None))
    assert set(_scrapes(doc)) == {"gym-vllm/policy", "node"}
    _, doc, _ = _render(_example("examples/multi-node-pools.yaml", gpu_metrics_port=None, node_metrics_port=None))
    assert set(_scrapes(doc)) == {"gym-vllm/policy"}


def test_nothing_to_scrape_leaves_the_prometheus_receiver_out(base) -> None:
    base["services"] = {"envs": {"type": "ray", "container": "ray:latest"}}
    config = _with_otel(base, gpu_metrics_port=None, node_metrics_port=None)
    text, doc, plan = _render(config)
    assert "prometheus" not in doc["receivers"]
    assert doc["service"]["pipelines"]["metrics"]["receivers"] == ["otlp"]
    assert plan.jobs[0].otel.scrape_jobs == ()
    assert check_collector_config(text) == []
    assert not any(name.startswith("GYM_NODE_") for name in _env_refs(text))


def test_scrape_interval_and_a_timeout_never_longer(base) -> None:
    _, doc, _ = _render(_with_otel(base, scrape_interval_seconds=5))
    sc = doc["receivers"]["prometheus"]["config"]["scrape_configs"][0]
    assert (sc["scrape_interval"], sc["scrape_timeout"], sc["metrics_path"]) == ("5s", "5s", "/metrics")
    _, doc, _ = _render(_with_otel(base, scrape_interval_seconds=60))
    sc = doc["receivers"]["prometheus"]["config"]["scrape_configs"][0]
    assert (sc["scrape_interval"], sc["scrape_timeout"]) == ("60s", "10s")


# -- receivers, processors, pipelines -----------------------------------------------------------


def test_listeners_are_on_all_interfaces(base) -> None:
    _, doc, _ = _render(_with_otel(base))
    assert doc["receivers"]["otlp"]["protocols"] == {
        "grpc": {"endpoint": "0.0.0.0:4317"},
        "http": {"endpoint": "0.0.0.0:4318"},
    }
    assert doc["extensions"] == {"health_check": {"endpoint": "0.0.0.0:13133"}}
    assert doc["service"]["extensions"] == ["health_check"]


def test_resource_attributes_identify_the_run(base) -> None:
    base["services"]["policy"]["served_model_name"] = "qwen"
    base["driver"]["policy_model"] = "policy"
    _, doc, plan = _render(_with_otel(base))
    actions = doc["processors"]["resource"]["attributes"]
    upserts = {a["key"]: a["value"] for a in actions if a["action"] == "upsert"}
    assert upserts == {
        "service.name": "gym-evals",
        "run_id": RUN_ID,
        "benchmark": "answer-judge",
        "cluster": "cluster",
        "user": "${env:USER}",
        "job_id": "${env:GYM_JOB_ID}",
        "slurm_job_id": "${env:SLURM_JOB_ID}",
        "model": "qwen",
    }
    assert actions[0] == {"key": "gym.source", "from_attribute": "service.name", "action": "insert"}
    converted = {a["key"] for a in actions if a["action"] == "convert"}
    assert converted == {"user", "job_id", "slurm_job_id"}


def test_model_attribute_falls_back_to_the_model_and_is_absent_without_a_policy(base) -> None:
    base["driver"]["policy_model"] = "policy"
    _, doc, _ = _render(_with_otel(base))
    upserts = {a["key"]: a.get("value") for a in doc["processors"]["resource"]["attributes"]}
    assert upserts["model"] == "Qwen/Qwen3-8B"
    base["driver"]["policy_model"] = None
    _, doc, _ = _render(_with_otel(base))
    assert "model" not in {a["key"] for a in doc["processors"]["resource"]["attributes"]}


def test_metric_names_lose_their_colons_in_the_metrics_pipeline_only(base) -> None:
    _, doc, _ = _render(_with_otel(base))
    statements = doc["processors"]["transform/metric_names"]["metric_statements"]
    assert statements == [{"context": "metric", "statements": ['replace_pattern(metric.name, ":", "_")']}]
    pipelines = doc["service"]["pipelines"]
    assert pipelines["metrics"]["processors"] == ["memory_limiter", "transform/metric_names", "resource", "batch"]
    for signal in ("traces", "logs"):
        assert pipelines[signal] == {
            "receivers": ["otlp"],
            "processors": ["memory_limiter", "resource", "batch"],
            "exporters": ["otlphttp", f"file/{signal}"],
        }


def test_dollars_in_literals_are_escaped(base) -> None:
    config = _with_otel(base, service_name="cost$center")
    text, doc, _ = _render(config)
    assert {"key": "service.name", "value": "cost$$center", "action": "upsert"} in doc["processors"]["resource"][
        "attributes"
    ]
    assert check_collector_config(text) == []


# -- the token ---------------------------------------------------------------------------------


def test_token_is_referenced_never_written(base, monkeypatch) -> None:
    monkeypatch.setenv("TEAM_OTEL_KEY", "another-secret-token")
    text, doc, _ = _render(_with_otel(base, token_env="TEAM_OTEL_KEY"))
    assert "another-secret-token" not in text and TOKEN not in text
    assert doc["exporters"]["otlphttp"]["headers"]["Authorization"] == "Bearer ${env:TEAM_OTEL_KEY}"
    assert "TEAM_OTEL_KEY" in _env_refs(text) and "OTEL_TOKEN" not in _env_refs(text)
    # No resource attribute carries it either (the file exports would then hold it).
    assert "authorization" not in {a["key"].lower() for a in doc["processors"]["resource"]["attributes"]}


# -- destination -------------------------------------------------------------------------------


def test_validate_destination_names_the_keys_and_the_ways_out(base) -> None:
    base["otel"] = {"enabled": True, "gym_telemetry": False}
    config = _validated(base)
    with pytest.raises(UserError) as exc:
        validate_destination(config)
    (line,) = exc.value.problems
    assert "\n" not in line
    assert "otel.endpoint and otel.service_name are not set" in line
    assert "otel.enabled: false" in line and "++otel.endpoint=" in line


def test_validate_destination_names_only_what_is_missing(base) -> None:
    base["otel"] = {"enabled": True, "endpoint": "https://otel.example.com", "gym_telemetry": False}
    with pytest.raises(UserError) as exc:
        validate_destination(_validated(base))
    assert exc.value.problems[0].startswith("otel.service_name is not set")
    assert "otel.endpoint" not in exc.value.problems[0].split(";")[0]


def test_validate_destination_rejects_a_non_url_and_accepts_off(base) -> None:
    base["otel"] = {"enabled": True, "endpoint": "otel.example.com:4318", "service_name": "s", "gym_telemetry": False}
    with pytest.raises(UserError, match=r"^otel.endpoint: 'otel.example.com:4318' is not an http\(s\) URL"):
        validate_destination(_validated(base))
    base["otel"] = {"enabled": False}
    validate_destination(_validated(base))  # nothing to check when telemetry is off
    validate_destination(_with_otel(base))


def test_planning_without_a_destination_is_a_user_error(base) -> None:
    base["otel"] = {"enabled": True, "gym_telemetry": False}  # on, but no endpoint
    config = _validated(base)
    with pytest.raises(UserError, match="otel.endpoint"):
        build_plan(config, RUN_ID)


# -- driver env --------------------------------------------------------------------------------


def test_driver_env_points_at_the_collector_beside_it() -> None:
    config = _example("examples/multi-node-pools.yaml")
    plan = build_plan(config, RUN_ID)
    driver = plan.jobs[1].driver
    env = {var.key: var.value for var in driver.env if var.key.startswith("OTEL_")}
    assert env == {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_SERVICE_NAME": "gym-driver",
        "OTEL_RESOURCE_ATTRIBUTES": f"run_id={RUN_ID},benchmark=livecodebench,cluster=cluster",
    }


# -- the checker catches what it claims to -------------------------------------------------------


def _break(mutate) -> list[str]:
    config = _example("examples/multi-node-pools.yaml")
    text, doc, _ = _render(config)
    mutate(doc)
    return check_collector_config(yaml.safe_dump(doc, sort_keys=False), secrets=[TOKEN])


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda d: d["service"]["pipelines"]["logs"]["exporters"].append("debug"),
            "'debug' is not defined under exporters",
        ),
        (
            lambda d: d["service"]["pipelines"]["traces"]["receivers"].append("prometheus"),
            "'prometheus' only produces metrics",
        ),
        (lambda d: d["processors"].update({"unused": {}}), "processors::unused: defined but used by no pipeline"),
        (lambda d: d["service"]["extensions"].append("pprof"), "'pprof' is not defined under extensions"),
        (
            lambda d: d["exporters"]["otlphttp"]["headers"].update(Authorization=f"Bearer {TOKEN}"),
            "never a literal token",
        ),
        (lambda d: d["exporters"]["otlphttp"].update(endpoint=f"https://x/{TOKEN}"), "holds a secret value literally"),
        (
            lambda d: d["exporters"]["otlphttp"]["headers"].update(Authorization="Bearer ${OTEL_TOKEN}"),
            "not a well-formed ${env:NAME}",
        ),
        (lambda d: d["exporters"]["file/logs"].update(path="/runs/$HOME/x"), "not a well-formed ${env:NAME}"),
        (lambda d: d["exporters"]["file/logs"].update(path="/runs/${env:1BAD}/x"), "not a well-formed ${env:NAME}"),
        (
            lambda d: d["receivers"]["otlp"]["protocols"]["http"].update(endpoint="0.0.0.0:4319"),
            "must listen on port 4318",
        ),
        (lambda d: d["receivers"]["otlp"]["protocols"]["grpc"].update(endpoint="localhost:4317"), "must bind 0.0.0.0"),
        (lambda d: d["extensions"]["health_check"].update(endpoint="0.0.0.0:4317"), "must listen on port 13133"),
        (
            lambda d: d["receivers"]["prometheus"]["config"]["scrape_configs"][1]["static_configs"][0][
                "targets"
            ].append("${env:GYM_NODE_0}:9100"),
            "also scraped by job 'dcgm'",
        ),
        (
            lambda d: d["receivers"]["prometheus"]["config"]["scrape_configs"][1].update(job_name="node"),
            "job_name 'node' is used twice",
        ),
        (
            lambda d: d["receivers"]["prometheus"]["config"]["scrape_configs"][0].update(scrape_timeout="30s"),
            "exceeds scrape_interval",
        ),
        (
            lambda d: d["receivers"]["prometheus"]["config"]["scrape_configs"][0]["static_configs"][0].update(
                targets=["${env:GYM_NODE_0}"]
            ),
            "is not host:port",
        ),
        (lambda d: d.update(exporter={}), "exporter: unknown top-level section"),
    ],
)
def test_checker_finds_each_kind_of_problem(mutate, expected) -> None:
    problems = _break(mutate)
    assert any(expected in p for p in problems), problems


def test_checker_rejects_non_yaml_and_an_empty_service() -> None:
    assert check_collector_config("a: [1")[0].startswith("not YAML")
    assert check_collector_config("receivers: {}\n") == ["service::pipelines: missing; the collector would do nothing"]


# -- a real collector, where one exists ------------------------------------------------------------


@pytest.mark.skipif(
    shutil.which("otelcol-contrib") is None,
    reason="no real otelcol-contrib on PATH: none can be had from PyPI, Debian or npm here "
    "(the only PyPI wheel is a trimmed test build without prometheus/otlp/file components)",
)
@pytest.mark.parametrize("name", CONFIGS)
def test_real_collector_validates_the_rendered_config(name, tmp_path) -> None:
    config = _example(name)
    plan = build_plan(config, RUN_ID)
    for job in plan.jobs:
        path = tmp_path / f"{job.benchmark}.yaml"
        path.write_text(render_collector_config(plan.run_id, job))
        env = {
            **os.environ,
            **{v: "127.0.0.1" for v in collector_env_names(job) if v.startswith("GYM_NODE_")},
            "GYM_JOB_ID": "1",
            "SLURM_JOB_ID": "1",
            "USER": "ci",
        }
        proc = subprocess.run(
            ["otelcol-contrib", "validate", "--config", str(path)], capture_output=True, text=True, env=env
        )
        assert proc.returncode == 0, proc.stderr
