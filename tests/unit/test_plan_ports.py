"""Which servers of a job get their port when it starts, what reads the claimed port, and whether
the job takes its nodes whole (compute.exclusive_nodes: auto unless set), said with its reason."""

from __future__ import annotations

import warnings

import pytest

from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.plan.building import build_plan
from nemo_gym.orchestration.plan.model import PortRef
from nemo_gym.orchestration.render import render_run

RUN_ID = "gym-job-20260101T000000Z-00abcd"
POLICY = PortRef("policy", 8000)
HEAD = PortRef("gym_head_server", 11000)


def plan_of(data: dict):
    data["driver"]["policy_model"] = data["driver"].get("policy_model", "policy")
    for compute in data["compute"].values():
        if compute["type"] == "slurm":
            compute.setdefault("node_pools", {"gpu": {"partition": "p", "gpus_per_node": 1}})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_plan(SubmitConfig.model_validate(data), RUN_ID)


def exclusive(job) -> bool:
    return any(option == "exclusive" for component in job.directives for option, _ in component)


def test_a_one_node_job_claims_its_servers_ports_and_every_consumer_reads_them(base) -> None:
    [job] = plan_of(base).jobs
    [step] = job.steps
    assert job.ports == (POLICY, HEAD)
    assert step.claimed_port == POLICY and "--port" not in step.argv
    assert step.health.port == POLICY and step.health.identity  # the identity check stays
    assert [url.port for url in job.service_urls] == [POLICY]
    assert [(a.before, a.port, a.after) for a in job.driver.ported_argv] == [
        ("+head_server.port=", HEAD, ""),
        ('+policy_base_url="http://localhost:', POLICY, '/v1"'),
    ]
    assert not any(arg.startswith(("+policy_base_url=", "+head_server.port=")) for arg in job.driver.run_argv)
    assert not exclusive(job)
    assert job.node_sharing == (
        "nodes shared (auto): it needs one node, and its servers' ports are claimed when it starts"
    )


def test_the_rendered_job_claims_then_gives_every_consumer_the_claimed_port(base) -> None:
    files = render_run(plan_of(base)).files
    job, step, driver = (
        files[f"answer-judge/{name}"].content for name in ("job.sh", "steps/policy.sh", "steps/driver.sh")
    )
    assert "nemo_gym.orchestration.ports claim" in job and "policy=8000 gym_head_server=11000" in job
    assert "nemo_gym.orchestration.ports release" in job
    assert ':${GYM_PORT_POLICY}/v1"' in job  # GYM_SERVICE_URL_POLICY
    assert 'gym_wait_http policy "http://$(gym_node_name 0):${GYM_PORT_POLICY}/' in job
    assert 'gym_step_run vllm serve Qwen/Qwen3-8B --port "${GYM_PORT_POLICY}" --tensor-parallel-size 1' in step
    assert '+head_server.port="${GYM_PORT_GYM_HEAD_SERVER}"' in driver
    assert "answer-judge/steps/py/nemo_gym/orchestration/ports.py" in files


def test_a_head_server_port_set_in_the_run_config_is_the_preferred_one(base) -> None:
    base["driver"]["benchmarks"]["answer-judge"] = {"run": {"head_server": {"port": 12000}}}
    [job] = plan_of(base).jobs
    assert job.ports[-1] == PortRef("gym_head_server", 12000)
    assert not any("head_server" in arg for arg in job.driver.run_argv)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            lambda c: c["compute"]["cluster"].update(node_pools={"g": {"partition": "p", "nodes": 2}}),
            "it needs 2 nodes",
        ),
        (lambda c: c["job"].update(deployment="shared"), "job.deployment: shared"),
        (lambda c: c["driver"]["benchmarks"]["answer-judge"].update(shards=2), "a sharded benchmark's merge"),
        (lambda c: c["services"]["policy"].update(extra_args="--port 9000"), "sets --port in its extra_args"),
        (lambda c: c["services"]["policy"].update(health_check={"port": 9001}), "health-checked on port 9001"),
        (lambda c: c["driver"].update(policy_model=None), "no driver.policy_model"),
    ],
)
def test_a_job_with_a_server_on_a_fixed_port_takes_its_nodes_whole_and_says_why(base, change, why) -> None:
    change(base)
    plan = plan_of(base)
    job = plan.submitted_jobs[0]
    assert job.ports == ()
    assert all(step.claimed_port is None and isinstance(step.health.port, int) for step in job.steps)
    assert exclusive(job)
    assert job.node_sharing.startswith("nodes whole (auto): ") and why in job.node_sharing


@pytest.mark.parametrize("value", [True, False])
def test_an_explicit_exclusive_nodes_is_honoured(base, value: bool) -> None:
    base["compute"]["cluster"]["exclusive_nodes"] = value
    [job] = plan_of(base).jobs
    assert exclusive(job) is value
    assert (
        job.node_sharing == f"nodes {'whole' if value else 'shared'}: compute.exclusive_nodes is {str(value).lower()}"
    )
    assert job.ports == (POLICY, HEAD)  # the ports are claimed either way


def test_a_kubernetes_pod_claims_nothing_its_network_is_its_own(base) -> None:
    base["compute"] = {"k8s": {"type": "kubernetes", "namespace": "ns", "gpus_per_node": 1, "pvc_name": "runs"}}
    [job] = plan_of(base).jobs
    assert job.ports == () and job.node_sharing == ""


def test_the_dry_run_says_how_each_job_takes_its_nodes_and_why(capsys, write_config, base) -> None:
    from nemo_gym.orchestration.cli.main import main

    base["driver"]["policy_model"] = "policy"
    base["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "p", "gpus_per_node": 1}}
    assert main(["eval", "submit", "-c", str(write_config(base)), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "[dry-run] answer-judge: nodes shared (auto): it needs one node, and its servers' ports" in out
    base["compute"]["cluster"]["node_pools"]["gpu"]["nodes"] = 2
    assert main(["eval", "submit", "-c", str(write_config(base)), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "[dry-run] answer-judge: nodes whole (auto): it needs 2 nodes, and multi-node jobs keep" in out


def test_jobs_that_take_their_nodes_alike_are_said_once(capsys, write_config, base) -> None:
    from nemo_gym.orchestration.cli.main import main

    base["driver"]["policy_model"] = "policy"
    base["driver"]["benchmarks"] = {f"b{i}": dict(base["driver"]["benchmarks"]["answer-judge"]) for i in range(5)}
    assert main(["eval", "submit", "-c", str(write_config(base)), "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    said = [line for line in out if line.startswith("[dry-run]") and ("nodes whole" in line or "nodes shared" in line)]
    assert len(said) == 1 and said[0].startswith("[dry-run] b0, b1, b2 and 2 more: nodes "), said
