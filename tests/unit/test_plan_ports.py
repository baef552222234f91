"""Which servers of a job get their port when it starts, what reads the claimed port, and whether
the job takes its nodes whole (compute.exclusive_nodes: auto unless set), said with its reason."""

from __future__ import annotations

import warnings

import pytest

from nemo_gym.orchestration import contract
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


def rendered(data: dict, *names: str) -> list[str]:
    """The named files of the benchmark's job directory, as ``data``'s run renders them."""
    files = render_run(plan_of(data)).files
    return [files[f"answer-judge/{name}"].content for name in names]


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
        (
            lambda c: c["driver"]["benchmarks"].update({"answer-judge": {"command": "python eval.py"}}),
            "a command benchmark",
        ),
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


def test_a_shared_deployment_claims_its_services_at_the_start_and_each_driver_its_head_server(base) -> None:
    base["job"]["deployment"] = "shared"
    base["driver"]["benchmarks"] = {"a": {}, "b": {}}
    plan = plan_of(base)
    [job] = plan.submitted_jobs
    assert job is plan.shared and not exclusive(job)
    assert job.ports == (POLICY,) and job.driver_ports == (HEAD,)
    assert job.node_sharing.startswith("nodes shared (auto)")
    for bench in plan.jobs:  # each driver reads the service's claimed port and its own head server's
        assert [(a.before, a.port) for a in bench.driver.ported_argv] == [
            ("+head_server.port=", HEAD),
            ('+policy_base_url="http://localhost:', POLICY),
        ]


def test_the_rendered_shared_job_claims_a_head_server_port_as_each_driver_starts(base) -> None:
    base["job"]["deployment"] = "shared"
    base["driver"]["benchmarks"] = {"a": {}, "b": {}}
    files = render_run(plan_of(base)).files
    job = files[f"{contract.SHARED_DEPLOYMENT_DIR}/{contract.JOB_SCRIPT}"].content
    claims = [line for line in job.splitlines() if "nemo_gym.orchestration.ports claim" in line]
    assert len(claims) == 2 and claims[0].endswith('policy=8000 2>"$(gym_state_dir)/ports-why"; then')
    # Owned by the driver's launching shell: given back when that driver ends, not the job.
    assert '--pid "$BASHPID" gym_head_server=11000' in claims[1]
    launch = job[job.index("gym_launch_driver() {") :]
    assert launch.splitlines()[1].strip() == 'gym_claim_driver_ports "$1" || return 1'
    assert "nemo_gym.orchestration.ports release" in job
    assert f"{contract.SHARED_DEPLOYMENT_DIR}/steps/py/nemo_gym/orchestration/ports.py" in files


def test_a_shard_merges_on_its_own_job_s_claimed_ports(base) -> None:
    base["driver"]["benchmarks"]["answer-judge"].update(shards=2)
    jobs = plan_of(base).jobs
    assert [job.ports for job in jobs] == [(POLICY, HEAD)] * 2 and not any(exclusive(job) for job in jobs)
    files = render_run(plan_of(base)).files
    driver = files["answer-judge/shards/1/steps/driver.sh"].content
    ported = ' +head_server.port="${GYM_PORT_GYM_HEAD_SERVER}" \'+policy_base_url="http://localhost:\'"${GYM_PORT_POLICY}"\'/v1"\')'
    for command in ("env_cmd=(gym env start ", "aggregate_cmd=(gym eval aggregate "):
        [line] = [line for line in driver.splitlines() if line.startswith(command)]
        assert line.endswith(ported) and line.count("policy_base_url") == 1 and line.count("head_server") == 1


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


def _prefill_decode(base: dict, **decode) -> dict:
    """``base`` with its policy a prefill/decode pair whose tiers share the one node of pool gpu."""
    base["services"]["policy"] = {
        "type": "vllm_pd",
        "container": "vllm/vllm-openai:v0.11.0",
        "model": "Qwen/Qwen3-8B",
        "prefill": {"node_pool": "gpu"},
        "decode": {"node_pool": "gpu", **decode},
    }
    base["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "p", "gpus_per_node": 4}}
    return base


def test_a_one_node_prefill_decode_job_claims_its_tiers_router_and_side_channels(base) -> None:
    [job] = plan_of(_prefill_decode(base, number_of_instances=2, tensor_parallel_size=1)).jobs
    prefill, decode, router = job.steps
    router_ref, metrics = PortRef("policy", 8000), PortRef("policy_metrics", 29000)
    assert job.ports == (
        PortRef("policy-prefill", 8001),
        PortRef("policy-decode", 8002),
        router_ref,
        PortRef("policy-prefill_nixl", 5600),
        PortRef("policy-decode_nixl", 5601, 2),  # one side-channel port a data-parallel rank
        metrics,
        HEAD,
    )
    # The router listens and serves its metrics on its claimed ports, and targets the tiers' claimed ones.
    assert (router.port, router.prometheus_port) == (router_ref, metrics)
    assert not {"--port", "--prometheus-port"} & set(router.argv)
    assert router.prefill == ((0, prefill.claimed_port),) and router.decode == ((0, decode.claimed_port),)
    assert router.health.port == router_ref
    # Each tier serves, is health-checked (its identity too) and opens its side channel on its claims.
    for tier, side in ((prefill, "GYM_PORT_POLICY_PREFILL_NIXL"), (decode, "GYM_PORT_POLICY_DECODE_NIXL")):
        assert tier.health.port == tier.claimed_port and tier.health.identity
        [channel] = [var for var in tier.env if var.key == "VLLM_NIXL_SIDE_CHANNEL_PORT"]
        assert (channel.kind, channel.value) == ("runtime", side)
    # The driver is answered through its own router: the policy's endpoint is the router's claim.
    [policy_url] = [a for a in job.driver.ported_argv if a.before.startswith("+policy_base_url=")]
    assert policy_url.port == router_ref
    assert not exclusive(job) and job.node_sharing.startswith("nodes shared (auto)")


def test_the_rendered_router_reads_its_claimed_ports_and_its_targets(base) -> None:
    router, decode, job = rendered(_prefill_decode(base), "steps/policy.sh", "steps/policy-decode.sh", "job.sh")
    assert '--port "${GYM_PORT_POLICY}" --prometheus-port "${GYM_PORT_POLICY_METRICS}"' in router
    assert '(--decode "http://$(gym_node_ip "$(gym_node_name 0)"):${GYM_PORT_POLICY_DECODE}")' in router
    assert 'export VLLM_NIXL_SIDE_CHANNEL_PORT="${GYM_PORT_POLICY_DECODE_NIXL-}"' in decode
    assert "policy-decode_nixl=5601 policy_metrics=29000 gym_head_server=11000 2>" in job


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda p: p.update(health_check={"port": 9100}), "service policy (its router) is health-checked on port 9100"),
        (lambda p: p["decode"].update(extra_args="--port 9000"), "service policy-decode sets --port in its extra_args"),
        (
            lambda p: p["prefill"].update(health_check={"port": 9101}),
            "service policy-prefill is health-checked on port 9101",
        ),
    ],
)
def test_a_prefill_decode_server_on_a_fixed_port_keeps_its_job_on_whole_nodes(base, change, why) -> None:
    _prefill_decode(base)
    change(base["services"]["policy"])
    [job] = plan_of(base).jobs
    assert job.ports == () and exclusive(job)
    router = job.steps[-1]
    assert isinstance(router.port, int) and all(isinstance(port, int) for _, port in router.prefill + router.decode)
    assert job.node_sharing.startswith(f"nodes whole (auto): {why}")


def test_a_prefill_decode_pair_across_nodes_keeps_its_configured_ports(base) -> None:
    _prefill_decode(base)
    base["compute"]["cluster"]["node_pools"] = {
        "prefill": {"partition": "p", "nodes": 1, "gpus_per_node": 4},
        "decode": {"partition": "p", "nodes": 1, "gpus_per_node": 4},
    }
    base["services"]["policy"]["prefill"]["node_pool"] = "prefill"
    base["services"]["policy"]["decode"]["node_pool"] = "decode"
    [job] = plan_of(base).jobs
    prefill, decode, router = job.steps
    assert job.ports == () and exclusive(job)
    assert (router.port, router.prometheus_port, router.prefill, router.decode) == (
        8000,
        29000,
        ((0, 8001),),
        ((1, 8002),),
    )
    assert ("VLLM_NIXL_SIDE_CHANNEL_PORT", "lit", "5601") in [(v.key, v.kind, v.value) for v in decode.env]


def _with_telemetry(base: dict) -> dict:
    base["otel"] = {"endpoint": "https://otel.example.com", "service_name": "evals", "gym_telemetry": False}
    return base


def test_a_one_node_job_with_telemetry_claims_its_collectors_ports_and_its_driver_sends_there(base) -> None:
    [job] = plan_of(_with_telemetry(base)).jobs
    grpc, http, health = PortRef("otel_grpc", 4317), PortRef("otel_http", 4318), PortRef("otel_health", 13133)
    assert job.ports == (POLICY, grpc, http, health, HEAD)
    assert job.otel.ports == (grpc, http, health)
    [scraped] = [j for j in job.otel.scrape_jobs if j.port == POLICY]  # its own policy's claimed port
    assert scraped.targets == ((0, "${env:GYM_NODE_0}:${env:GYM_PORT_POLICY}"),)
    [endpoint] = [var for var in job.driver.env if var.key == "OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert (endpoint.kind, endpoint.value, endpoint.port) == ("ported", "http://localhost:{port}", http)
    assert not exclusive(job)


def test_the_rendered_collector_and_driver_read_the_claimed_ports(base) -> None:
    config, driver, job = rendered(_with_telemetry(base), "otel/collector.yaml", "steps/driver.sh", "job.sh")
    assert "endpoint: 0.0.0.0:${env:GYM_PORT_OTEL_GRPC}" in config
    assert "endpoint: 0.0.0.0:${env:GYM_PORT_OTEL_HEALTH}" in config
    assert "needs in its environment: GYM_NODE_0, GYM_JOB_ID" in config and "GYM_PORT_POLICY." in config
    assert 'export OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:"${GYM_PORT_OTEL_HTTP}"\n' in driver
    assert 'gym_wait_http otel_collector "http://$(gym_node_name 0):${GYM_PORT_OTEL_HEALTH}/"' in job
    assert job.index("nemo_gym.orchestration.ports claim") < job.index("gym_wait_http otel_collector")


def test_a_multi_node_job_with_telemetry_keeps_the_collectors_configured_ports(base) -> None:
    _with_telemetry(base)["compute"]["cluster"]["node_pools"] = {"g": {"partition": "p", "nodes": 2}}
    [job] = plan_of(base).jobs
    assert job.ports == () and job.otel.ports == (4317, 4318, 13133) and exclusive(job)
    [endpoint] = [var for var in job.driver.env if var.key == "OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert (endpoint.kind, endpoint.value) == ("lit", "http://localhost:4318")


def _with_ray(base: dict, **ray) -> dict:
    """``base`` with a ray service beside the policy on the one node of pool gpu."""
    base["services"]["policy"]["node_pool"] = "gpu"
    base["services"]["envs"] = {"type": "ray", "container": "ray:latest", "node_pools": ["gpu"], **ray}
    base["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "p", "gpus_per_node": 1}}
    return base


def test_a_one_node_ray_head_claims_its_gcs_and_fixed_default_ports_and_the_driver_dials_the_claim(base) -> None:
    [job] = plan_of(_with_ray(base)).jobs
    gcs = PortRef("envs", 6379)
    others = (PortRef("envs_dashboard", 8265), PortRef("envs_dashboard_agent", 22365))
    assert job.ports == (POLICY, gcs, *others, HEAD)
    [head] = [step for step in job.steps if step.kind == "ray-head"]
    assert head.ray_port == gcs and not any(arg.startswith("--port") for arg in head.argv)
    assert [(a.before, a.port) for a in head.ported_args] == [
        ("--port=", gcs),
        ("--dashboard-port=", others[0]),
        ("--dashboard-agent-listen-port=", others[1]),
    ]
    assert [a.port for a in job.ray_addresses] == [gcs]
    assert not exclusive(job)
    [step, script] = rendered(_with_ray(base), "steps/envs.sh", "job.sh")
    assert 'ray start --head --port="${GYM_PORT_ENVS}" --dashboard-port="${GYM_PORT_ENVS_DASHBOARD}"' in step
    assert 'until ray status --address "$my_ip:${GYM_PORT_ENVS}"' in step
    assert 'GYM_RAY_ADDRESS_ENVS="$(gym_node_ip "$(gym_node_name 0)"):${GYM_PORT_ENVS}"' in script


@pytest.mark.parametrize(
    ("ray", "why"),
    [
        ({"extra_args": "--dashboard-port=9999"}, "service envs (ray) sets --dashboard-port in its extra_args"),
        ({"extra_args": "--port 7000"}, "service envs (ray) sets --port in its extra_args"),
        ({"health_check": {"port": 8265}}, "service envs (ray) is health-checked on port 8265"),
    ],
)
def test_a_ray_head_on_a_port_it_names_keeps_its_job_on_whole_nodes(base, ray: dict, why: str) -> None:
    [job] = plan_of(_with_ray(base, **ray)).jobs
    [head] = [step for step in job.steps if step.kind == "ray-head"]
    assert job.ports == () and head.ray_port == 6379 and head.ported_args == () and exclusive(job)
    assert job.node_sharing.startswith(f"nodes whole (auto): {why}")
