"""Every validation rule of the config, checked by its message (not only that it fails)."""

from __future__ import annotations

import warnings

import pytest
from pydantic import ValidationError

from nemo_gym.orchestration import api
from nemo_gym.orchestration.api import SubmitConfig, effective_ray_serve, resolve_env_dict
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.resolved import resolved_config_dict
from nemo_gym.orchestration.validate import validate_config


def errors_of(data) -> str:
    with pytest.raises(ValidationError) as info:
        SubmitConfig.model_validate(data)
    return str(info.value)


def problem_lines(data) -> list[str]:
    """The lines the CLI prints for an invalid config."""
    with pytest.raises(UserError) as info:
        validate_config(data)
    return info.value.problems


def validate_quietly(data) -> SubmitConfig:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return SubmitConfig.model_validate(data)


# -- env prefixes -----------------------------------------------------------------------------


def test_env_prefixes_resolve(monkeypatch) -> None:
    monkeypatch.setenv("GYM_TEST_SECRET", "s3cret")
    assert resolve_env_dict({"A": "lit:x:y", "B": "host:GYM_TEST_SECRET", "C": "runtime:NODE_VAR"}) == {
        "A": "x:y",
        "B": "s3cret",
        "C": "runtime:NODE_VAR",
    }


def test_host_prefix_reads_at_validation_and_fails_when_unset(monkeypatch) -> None:
    monkeypatch.delenv("GYM_TEST_UNSET", raising=False)
    with pytest.raises(ValueError, match="host:GYM_TEST_UNSET, but 'GYM_TEST_UNSET' is not set"):
        resolve_env_dict({"K": "host:GYM_TEST_UNSET"})


@pytest.mark.parametrize(
    "raw, message",
    [
        ("plain", "must start with one of the prefixes 'lit:', 'host:', or 'runtime:'"),
        ("Lit:x", "must start with one of the prefixes"),
        ("host:1BAD", "'1BAD' is not a valid environment variable name for host:1BAD"),
        ("runtime:A-B", "'A-B' is not a valid environment variable name for runtime:A-B"),
    ],
)
def test_env_prefix_errors(raw: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        resolve_env_dict({"K": raw})


def test_env_applies_to_services_and_driver(base, monkeypatch) -> None:
    monkeypatch.setenv("GYM_TEST_TOKEN", "tok")
    base["services"]["policy"]["env"] = {"T": "host:GYM_TEST_TOKEN"}
    base["driver"]["env"] = {"R": "runtime:SLURM_JOB_ID"}
    config = validate_quietly(base)
    assert config.services["policy"].env == {"T": "tok"}
    assert config.driver.env == {"R": "runtime:SLURM_JOB_ID"}
    assert api.env_sources_of(config.services["policy"])["T"].kind == "host"


def test_env_key_must_be_a_variable_name(base) -> None:
    base["services"]["policy"]["env"] = {"A-B": "lit:1"}
    assert "'A-B' is not a valid environment variable name" in errors_of(base)


# -- services ---------------------------------------------------------------------------------


def test_vllm_health_check_defaults_to_its_own_port(base) -> None:
    base["services"]["policy"]["port"] = 9001
    config = validate_quietly(base)
    hc = config.services["policy"].health_check
    assert (hc.path, hc.port, hc.timeout_seconds) == ("/health", 9001, 60)


def test_vllm_health_check_without_port_gets_the_service_port(base) -> None:
    base["services"]["policy"]["health_check"] = {"path": "/v1/models", "timeout_seconds": 900}
    hc = validate_quietly(base).services["policy"].health_check
    assert (hc.path, hc.port, hc.timeout_seconds) == ("/v1/models", 8000, 900)


def test_ray_service_has_no_default_health_check(base) -> None:
    base["services"]["envs"] = {"type": "ray", "container": "ray"}
    assert validate_quietly(base).services["envs"].health_check is None


def test_number_of_instances_at_least_one(base) -> None:
    base["services"]["policy"]["number_of_instances"] = 0
    assert "number_of_instances must be >= 1, got 0" in errors_of(base)


@pytest.mark.parametrize(
    "ray, message",
    [
        ({"node_pool": "a"}, "spans `node_pools`, not a single `node_pool`; use node_pools: [a]"),
        ({"node_pools": ["a", "a"]}, "lists a pool more than once: ['a']"),
        ({"node_pools": ["a"], "resources": {"b": {"x": 1}}}, "sets resources for b, which it does not span"),
    ],
)
def test_ray_shape_rules(base, ray, message) -> None:
    base["compute"]["cluster"]["node_pools"] = {"a": {"partition": "p"}, "b": {"partition": "p"}}
    base["services"]["envs"] = {"type": "ray", "container": "ray", **ray}
    assert message in errors_of(base)


def test_unknown_service_type(base) -> None:
    base["services"]["policy"]["type"] = "vlm"
    assert "does not match any of the expected tags: 'vllm', 'ray', 'vllm_pd'" in errors_of(base)


def test_data_parallel_rpc_port_is_a_port(base) -> None:
    assert validate_quietly(base).services["policy"].data_parallel_rpc_port == 13345
    base["services"]["policy"]["data_parallel_rpc_port"] = 0
    assert problem_lines(base) == [
        "services.policy.data_parallel_rpc_port: 0 is not a TCP port; use a number from 1 to 65535"
    ]


# -- otel ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["scrape_interval_seconds", "health_check_timeout_seconds"])
def test_otel_positive(base, field) -> None:
    base["otel"][field] = 0
    assert "must be >= 1, got 0" in errors_of(base)


def test_otel_token_env_must_be_a_name(base) -> None:
    base["otel"]["token_env"] = "MY-TOKEN"
    assert "otel.token_env: 'MY-TOKEN' is not a valid environment variable name" in errors_of(base)


def test_gym_telemetry_without_gym_install_is_a_valid_config(base) -> None:
    # The spec and NeMo Gym 0.7.0 accept it; the submit path warns (test_gym_070_acceptance.py).
    base["otel"] = {"endpoint": "https://otel.example.com", "service_name": "s"}
    config, notes = validate_config(base)
    assert (config.otel.gym_telemetry, config.driver.gym_install, notes) == (True, None, [])


def test_gym_telemetry_defaults(base) -> None:
    otel = validate_quietly(base).otel
    assert (otel.gym_telemetry, otel.gym_span_groups, otel.gym_logs) == (True, "default,verify", True)


def test_gym_span_groups_on_one_line(base) -> None:
    base["otel"]["gym_span_groups"] = "default\nverify"
    assert problem_lines(base) == ["otel.gym_span_groups: contains a line break; write it on one line"]


# -- placement --------------------------------------------------------------------------------


def test_placement_resolves_to_the_sole_compute(base) -> None:
    assert validate_quietly(base).services["policy"].placement == "cluster"


def test_placement_must_name_the_compute(base) -> None:
    base["services"]["policy"]["placement"] = "other"
    assert "Service 'policy' placement 'other' does not match any compute resource (cluster)" in errors_of(base)


def test_only_one_compute(base) -> None:
    base["compute"]["second"] = {"type": "slurm", "account": "b"}
    assert "Multiple compute resources are not supported yet (cluster, second)" in errors_of(base)


def test_node_pool_must_exist(base) -> None:
    base["services"]["policy"]["node_pool"] = "gpu"
    assert "node_pool 'gpu' does not match any node pool of compute 'cluster' (none declared)" in errors_of(base)


def test_ray_node_pools_must_exist(base) -> None:
    base["compute"]["cluster"]["node_pools"] = {"a": {"partition": "p"}}
    base["services"]["envs"] = {"type": "ray", "container": "ray", "node_pools": ["zz"]}
    assert "Service 'envs' node_pools ['zz'] do not match any node pool of compute 'cluster' (a)" in errors_of(base)


def test_multi_node_dp_must_divide(base) -> None:
    base["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "p", "nodes": 2}}
    base["services"]["policy"]["number_of_instances"] = 3
    assert "number_of_instances=3, which must be evenly divisible by the number of nodes (2)" in errors_of(base)


# -- GPU footprint ------------------------------------------------------------------------------


def pools(base, nodes: int, gpus: int) -> None:
    base["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "p", "nodes": nodes, "gpus_per_node": gpus}}


@pytest.mark.parametrize(
    "nodes, tp, pp, n, ray_serve, message",
    [
        (
            1,
            4,
            1,
            3,
            False,
            "requires 12 GPUs (tensor_parallel_size=4 x pipeline_parallel_size=1 x number_of_instances=3), which exceeds the node pool's gpus_per_node (8)",
        ),
        (
            2,
            8,
            1,
            4,
            False,
            "requires 16 GPUs (tensor_parallel_size=8 x pipeline_parallel_size=1 x 2 instance(s) per node), which exceeds a single node's gpus_per_node (8)",
        ),
        (
            2,
            8,
            4,
            1,
            False,
            "requires 32 GPUs (tensor_parallel_size=8 x pipeline_parallel_size=4), which exceeds the total GPUs across all nodes (16)",
        ),
        (
            2,
            8,
            1,
            3,
            True,
            "requires 24 GPUs (tensor_parallel_size=8 x pipeline_parallel_size=1 x number_of_instances=3 (ray_serve gateway)), which exceeds the total GPUs across all nodes (16)",
        ),
    ],
)
def test_gpu_footprint_errors(base, nodes, tp, pp, n, ray_serve, message) -> None:
    pools(base, nodes, 8)
    base["services"]["policy"].update(
        tensor_parallel_size=tp, pipeline_parallel_size=pp, number_of_instances=n, use_ray_serve=ray_serve
    )
    text = errors_of(base)
    assert message in text
    assert "Reduce number_of_instances/tensor_parallel_size/pipeline_parallel_size, or add more nodes/GPUs." in text


def test_idle_gpus_warn_once_and_do_not_fail(base) -> None:
    pools(base, 1, 8)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        SubmitConfig.model_validate(base)
    messages = [str(w.message) for w in caught]
    assert len(messages) == 1
    assert "uses 1 of 8 GPUs" in messages[0] and "leaving 7 GPU(s) idle" in messages[0]


def test_full_footprint_is_silent(base) -> None:
    pools(base, 1, 8)
    base["services"]["policy"].update(tensor_parallel_size=4, number_of_instances=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SubmitConfig.model_validate(base)


def test_footprint_skipped_without_gpu_counts(base) -> None:
    base["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "p"}}
    base["services"]["policy"]["tensor_parallel_size"] = 64
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        SubmitConfig.model_validate(base)


def test_pinned_service_counts_only_its_pool(base) -> None:
    base["compute"]["cluster"]["node_pools"] = {
        "small": {"partition": "p", "gpus_per_node": 8},
        "big": {"partition": "p", "gpus_per_node": 8, "nodes": 2},
    }
    base["services"]["policy"].update(node_pool="small", tensor_parallel_size=16)
    assert "which exceeds the node pool's gpus_per_node (8)" in errors_of(base)


def test_pools_that_differ_need_every_vllm_service_pinned_to_one(base) -> None:
    base["compute"]["cluster"]["node_pools"] = {
        "a": {"partition": "p", "gpus_per_node": 2},
        "b": {"partition": "p", "gpus_per_node": 8},
    }
    assert problem_lines(base) == [
        "services.policy.node_pool: is not set, but the node pools differ on gpus_per_node (a=2, b=8), so each "
        "pool is a component of a heterogeneous job and a service runs within one; set "
        "services.policy.node_pool to one of a, b"
    ]
    base["services"]["policy"]["node_pool"] = "a"
    base["services"]["policy"]["tensor_parallel_size"] = 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # checked against its own pool's GPUs: no "idle GPUs" from pool b
        SubmitConfig.model_validate(base)


def test_pools_that_differ_take_no_job_array(base) -> None:
    base["compute"]["cluster"]["node_pools"] = {
        "a": {"partition": "p", "extra_args": {"constraint": "h100", "array": "1-3"}},
        "b": {"partition": "p", "extra_args": {"constraint": "a100"}},
    }
    base["services"]["policy"]["node_pool"] = "a"
    assert problem_lines(base) == [
        "compute.cluster.node_pools.a.extra_args.array: the node pools differ on extra_args ("
        "a={'constraint': 'h100', 'array': '1-3'}, b={'constraint': 'a100'}), so the job is a heterogeneous "
        "Slurm job, and Slurm has no job arrays of those; drop array or make the pools agree"
    ]


def test_extra_args_must_split(base) -> None:
    base["services"]["policy"]["extra_args"] = "--chat-template '{{x}}"
    assert "cannot be split into arguments (No closing quotation); balance its quotes" in errors_of(base)


def test_ray_health_check_needs_a_port(base) -> None:
    base["services"]["envs"] = {"type": "ray", "container": "ray", "health_check": {"path": "/"}}
    assert "A ray service has no HTTP endpoint of its own to probe" in errors_of(base)


# -- effective_ray_serve ------------------------------------------------------------------------


def vllm(**kw) -> api.VllmServiceConfig:
    return api.VllmServiceConfig(type="vllm", container="c", model="m", **kw)


def test_effective_ray_serve() -> None:
    assert effective_ray_serve(vllm(use_ray_serve=True), 1, []) is True
    assert effective_ray_serve(vllm(number_of_instances=2, tensor_parallel_size=16), 4, []) is False
    assert effective_ray_serve(vllm(number_of_instances=2, tensor_parallel_size=16), 4, [8]) is True
    assert effective_ray_serve(vllm(number_of_instances=2, tensor_parallel_size=8), 4, [8]) is False
    assert effective_ray_serve(vllm(number_of_instances=1, tensor_parallel_size=16), 4, [8]) is False
    assert effective_ray_serve(vllm(number_of_instances=2, tensor_parallel_size=16), 1, [8]) is False


# -- policy wiring ------------------------------------------------------------------------------


def test_policy_wiring_into_every_benchmark(base) -> None:
    base["driver"]["policy_model"] = "policy"
    base["driver"]["benchmarks"]["second"] = {"run": {"num_repeats": 2}}
    base["services"]["policy"].update(port=8100, served_model_name="qwen")
    config = validate_quietly(base)
    for bench in config.driver.benchmarks.values():
        assert bench.run["policy_base_url"] == "http://localhost:8100/v1"
        assert bench.run["policy_model_name"] == "qwen"
        assert bench.run["policy_api_key"] == "dummy"
    assert config.driver.benchmarks["second"].run["num_repeats"] == 2


def test_policy_model_name_falls_back_to_model(base) -> None:
    base["driver"]["policy_model"] = "policy"
    assert validate_quietly(base).driver.benchmarks["answer-judge"].run["policy_model_name"] == "Qwen/Qwen3-8B"


def test_policy_wiring_conflict(base) -> None:
    base["driver"]["policy_model"] = "policy"
    base["driver"]["benchmarks"]["answer-judge"] = {"run": {"policy_base_url": "http://elsewhere/v1"}}
    assert (
        "Benchmark 'answer-judge' run config already sets ['policy_base_url'] but driver.policy_model is also set. Remove one."
        in errors_of(base)
    )


def test_policy_wiring_accepts_its_own_earlier_output(base) -> None:
    base["driver"]["policy_model"] = "policy"
    first = validate_quietly(base).model_dump(mode="json")
    base["driver"]["benchmarks"] = first["driver"]["benchmarks"]
    assert validate_quietly(base).driver.benchmarks == SubmitConfig.model_validate(base).driver.benchmarks


def test_policy_model_must_name_a_service(base) -> None:
    base["driver"]["policy_model"] = "polcy"
    assert "driver.policy_model 'polcy' does not match any service (policy)" in errors_of(base)


def test_policy_host_is_the_host_of_the_injected_url(base) -> None:
    base["driver"].update(policy_model="policy", policy_host="10.1.2.3")
    assert validate_quietly(base).driver.benchmarks["answer-judge"].run["policy_base_url"] == "http://10.1.2.3:8000/v1"
    base["driver"]["policy_host"] = "[fd00::17]"
    assert (
        validate_quietly(base).driver.benchmarks["answer-judge"].run["policy_base_url"] == "http://[fd00::17]:8000/v1"
    )


@pytest.mark.parametrize(
    "host, message",
    [
        (
            "http://head-node:8000",
            "'http://head-node:8000' is a URL; give only the host, e.g. 'head-node' (the scheme and port are added)",
        ),
        (
            "head node",
            "'head node' is not a host name; give a name or IP address without spaces, port or path, e.g. 'localhost'",
        ),
        ("head:8000", "'head:8000' is not a host name"),
        ("head/v1", "'head/v1' is not a host name"),
        ("-oProxyCommand", "'-oProxyCommand' is not a host name"),
        ("", "is empty; give a host name or IP address, e.g. 'localhost'"),
    ],
)
def test_policy_host_must_be_a_host(base, host, message) -> None:
    base["driver"]["policy_host"] = host
    (line,) = problem_lines(base)
    assert line.startswith(f"driver.policy_host: {message}")


# -- command ------------------------------------------------------------------------------------


def test_command_replaces_gym_eval_run(base) -> None:
    base["driver"]["benchmarks"]["answer-judge"] = {"prepare": {"split": "test"}, "command": "bash run.sh"}
    bench = validate_quietly(base).driver.benchmarks["answer-judge"]
    assert (bench.command, bench.prepare, bench.run) == ("bash run.sh", {"split": "test"}, {})


def test_command_with_run_is_refused(base) -> None:
    base["driver"]["benchmarks"]["answer-judge"] = {"command": "bash run.sh", "run": {"num_repeats": 4}}
    assert problem_lines(base) == [
        "driver.benchmarks.answer-judge.command: replaces `gym eval run`, but run sets ['num_repeats'], which "
        "only `gym eval run` reads; fold those settings into the command, or drop command"
    ]


@pytest.mark.parametrize("resumable", [True, {"max_retries": 1}])
def test_command_with_resumable_is_refused(base, resumable) -> None:
    base["driver"]["benchmarks"]["answer-judge"] = {"command": "bash run.sh", "resumable": resumable}
    assert problem_lines(base) == [
        "driver.benchmarks.answer-judge.command: is set together with resumable, but a resumed job can only tell "
        "`gym eval run` to continue from its cache, so a command would start over from zero; drop resumable, or "
        "drop command and configure run"
    ]


def test_blank_command_is_refused(base) -> None:
    base["driver"]["benchmarks"]["answer-judge"] = {"command": "  \n"}
    assert problem_lines(base) == [
        "driver.benchmarks.answer-judge.command: is empty; give the shell script to run, or remove command"
    ]


def test_command_gets_the_policy_wiring_and_round_trips(base) -> None:
    base["driver"]["policy_model"] = "policy"
    base["driver"]["benchmarks"]["answer-judge"] = {"command": "curl $NEMO_GYM_POLICY_BASE_URL/models"}
    config = validate_quietly(base)
    assert config.driver.benchmarks["answer-judge"].run["policy_base_url"] == "http://localhost:8000/v1"
    # The resolved config carries the injected keys beside the command; they are not user settings.
    again = validate_quietly(resolved_config_dict(config))
    assert again == config


def test_command_with_other_policy_keys_is_refused(base) -> None:
    base["driver"]["benchmarks"]["answer-judge"] = {"command": "x", "run": {"policy_base_url": "http://elsewhere/v1"}}
    assert problem_lines(base)[0].startswith(
        "driver.benchmarks.answer-judge.command: replaces `gym eval run`, but run sets ['policy_base_url']"
    )


def test_ray_policy_injects_nothing(base) -> None:
    base["services"] = {"envs": {"type": "ray", "container": "ray"}}
    base["driver"]["policy_model"] = "envs"
    assert validate_quietly(base).driver.benchmarks["answer-judge"].run == {}


# -- beyond upstream: values nobody could mean ------------------------------------------------------


@pytest.mark.parametrize(
    "path, value, message",
    [
        (("services", "policy", "port"), 0, "0 is not a TCP port; use a number from 1 to 65535"),
        (("services", "policy", "port"), 70000, "70000 is not a TCP port"),
        (("services", "policy", "health_check"), {"port": -1}, "-1 is not a TCP port"),
        (("services", "policy", "health_check"), {"timeout_seconds": 0}, "must be >= 1, got 0"),
        (("services", "policy", "health_check"), {"path": "health"}, "is not a URL path; write it like '/health'"),
        (("services", "policy", "tensor_parallel_size"), 0, "must be >= 1, got 0"),
        (("services", "policy", "pipeline_parallel_size"), -2, "must be >= 1, got -2"),
        (("services", "policy", "model"), "", "is empty; give a value"),
        (("services", "policy", "container"), "img\nevil", "contains a line break"),
        (("services", "policy", "mounts"), ["data:/data"], "'data' is not an absolute path"),
        (("services", "policy", "mounts"), ["/a:/b:ro:x"], "is not a mount; write 'SRC', 'SRC:DST' or 'SRC:DST:FLAGS'"),
        (("otel", "gpu_metrics_port"), 0, "0 is not a TCP port"),
        (("compute", "cluster", "walltime"), "4 hours", "is not a Slurm time"),
        (("compute", "cluster", "account"), "my account", "is not a Slurm name"),
        (
            ("compute", "cluster", "extra_args"),
            {"--exclusive": ""},
            "write the option without dashes, e.g. 'exclusive'",
        ),
        (("compute", "cluster", "extra_args"), {"comment": "a\n#SBATCH --x"}, "contains a line break"),
        (("job", "output_path"), "runs", "is not an absolute path"),
    ],
)
def test_nonsense_values_rejected(base, path, value, message) -> None:
    node = base
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    assert message in errors_of(base)


@pytest.mark.parametrize("field, value", [("nodes", 0), ("ntasks_per_node", 0), ("gpus_per_node", 0)])
def test_node_pool_sizes_positive(base, field, value) -> None:
    base["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "p", field: value}}
    assert f"must be >= 1, got {value}" in errors_of(base)


@pytest.mark.parametrize("name", ["a b", "../x", "..", "a/b", ""])
def test_benchmark_names_must_be_directory_names(base, name) -> None:
    base["driver"]["benchmarks"] = {name: {}}
    assert "cannot be a directory name" in errors_of(base)


def test_no_benchmarks(base) -> None:
    base["driver"]["benchmarks"] = {}
    assert "no benchmark is declared" in errors_of(base)


def test_service_names_must_be_file_names(base) -> None:
    base["services"]["my policy"] = base["services"].pop("policy")
    assert "service name 'my policy' cannot be used in file names" in errors_of(base)


def test_two_services_on_one_port_of_a_node(base) -> None:
    base["services"]["judge"] = dict(base["services"]["policy"])
    assert "services.judge.port and services.policy.port both use port 8000 on the same node" in errors_of(base)


def test_same_port_on_different_pools_is_fine(base) -> None:
    base["compute"]["cluster"]["node_pools"] = {"a": {"partition": "p"}, "b": {"partition": "p"}}
    base["services"]["policy"]["node_pool"] = "a"
    base["services"]["judge"] = {**base["services"]["policy"], "node_pool": "b"}
    validate_quietly(base)


def test_service_port_clashes_with_collector(base) -> None:
    base["otel"] = {"enabled": True}
    base["services"]["policy"]["port"] = 4318
    assert "services.policy.port and the OTel collector both use port 4318" in errors_of(base)


@pytest.mark.parametrize("walltime", ["30", "30:00", "04:00:00", "2-00", "2-12:00", "1-00:00:00", "UNLIMITED"])
def test_slurm_walltimes_accepted(base, walltime) -> None:
    base["compute"]["cluster"]["walltime"] = walltime
    validate_quietly(base)


@pytest.mark.parametrize("field", ["model", "served_model_name"])
def test_a_vllm_argument_that_reads_as_an_option_is_refused(base, field) -> None:
    base["services"]["policy"][field] = "--"
    text = errors_of(base)
    assert f"services.policy.vllm.{field}" in text or f"services.policy.{field}" in text
    assert "starts with '-', which vLLM would read as an option" in text
