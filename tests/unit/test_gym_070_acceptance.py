"""What the spec and NeMo Gym 0.7.0 accept is accepted; what reaches gym misspelt is caught (issue 20).

Each rule is pinned by what a user sees: the validated config, the warning line, the error line.
"""

from __future__ import annotations

import ast
import inspect
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

import nemo_gym.orchestration as package
from nemo_gym.orchestration import errors
from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.validate import validate_config

PACKAGE_DIR = Path(package.__file__).parent


def plain() -> dict[str, Any]:
    return {
        "services": {"policy": {"type": "vllm", "container": "vllm:1", "model": "m"}},
        "compute": {"cluster": {"type": "slurm", "account": "acct"}},
        "driver": {"policy_model": "policy", "benchmarks": {"answer-judge": {}}},
        "job": {"output_path": "/scratch/runs"},
        "otel": {"enabled": False},
    }


def prefill_decode() -> dict[str, Any]:
    data = plain()
    data["services"] = {
        "pd": {
            "type": "vllm_pd",
            "container": "vllm:1",
            "model": "m",
            "prefill": {"node_pool": "prefill"},
            "decode": {"node_pool": "decode"},
        }
    }
    pools = {name: {"partition": "p"} for name in ("router", "prefill", "decode")}
    data["compute"]["cluster"]["node_pools"] = pools
    data["driver"]["policy_model"] = "pd"
    return data


def heterogeneous() -> dict[str, Any]:
    data = plain()
    data["compute"]["cluster"]["node_pools"] = {"a": {"partition": "p1"}, "b": {"partition": "p2"}}
    data["services"]["policy"]["node_pool"] = "a"
    return data


def validation_error(data: dict[str, Any]) -> ValidationError:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValidationError) as info:
            SubmitConfig.model_validate(data)
    return info.value


def cli_lines(data: dict[str, Any]) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(UserError) as info:
            validate_config(data)
    return info.value.problems


def submit(capsys, data: dict[str, Any], tmp_path: Path, *args: str) -> tuple[int, str, list[str]]:
    """``gym eval submit`` of ``data``: exit code, stdout, and the warning and error lines."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code = main(["eval", "submit", "-c", str(path), *args])
    out, err = capsys.readouterr()
    return code, out, [line for line in err.splitlines() if line.startswith(("warning: ", "error: "))]


# -- gym's telemetry without driver.gym_install: valid, and one warning where a run is staged ---------

TELEMETRY_WARNING = (
    "warning: otel.gym_telemetry: on, but without driver.gym_install nothing installs gym's telemetry extra, "
    "so gym's own spans and logs arrive only if the driver's container has it (the collector runs either "
    "way); set otel.gym_telemetry: false to silence this, or driver.gym_install to make it certain"
)


def spec_conformant() -> dict[str, Any]:
    """Written to the spec: otel as its defaults (enabled) with a destination, no driver.gym_install."""
    data = plain()
    data["otel"] = {"endpoint": "https://otel.example.com", "service_name": "gym-evals"}
    return data


def test_a_spec_conformant_config_with_the_default_otel_validates_at_the_api() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not even a warning from the models
        config = SubmitConfig.model_validate(spec_conformant())
    assert (config.otel.enabled, config.otel.gym_telemetry, config.driver.gym_install) == (True, True, None)


def test_resolve_only_prints_it_without_a_warning(capsys, tmp_path) -> None:
    code, out, lines = submit(capsys, spec_conformant(), tmp_path, "--resolve-only")
    assert (code, lines) == (0, [])
    assert yaml.safe_load(out)["otel"]["endpoint"] == "https://otel.example.com"


def test_dry_run_stages_it_with_exactly_the_one_warning(capsys, tmp_path) -> None:
    code, out, lines = submit(capsys, spec_conformant(), tmp_path, "--dry-run")
    assert (code, lines) == (0, [TELEMETRY_WARNING])
    assert "[dry-run] would submit 1 job(s)" in out


@pytest.mark.parametrize(
    "change",
    [
        {"otel": {"gym_telemetry": False}},  # silenced
        {"driver": {"gym_install": {"ref": "v0.7.0"}}},  # made certain
        {"otel": {"enabled": False}},  # no collector to send to
    ],
    ids=["gym_telemetry false", "gym_install", "otel off"],
)
def test_no_warning_when_gym_telemetry_is_off_or_installed(capsys, tmp_path, change) -> None:
    data = spec_conformant()
    for section, values in change.items():
        data[section].update(values)
    assert submit(capsys, data, tmp_path, "--dry-run")[::2] == (0, [])


def test_the_library_prepare_carries_the_warning_for_submit_and_dry_run() -> None:
    from nemo_gym.orchestration.library import prepare

    config = SubmitConfig.model_validate(spec_conformant())
    assert prepare(config).warnings == [TELEMETRY_WARNING.removeprefix("warning: ")]


def test_a_sweep_warns_once_for_all_its_runs(capsys, tmp_path) -> None:
    code, _, lines = submit(
        capsys, spec_conformant(), tmp_path, "--dry-run", "-m", "+driver.benchmarks.answer-judge.run.limit=1,2"
    )
    assert (code, lines) == (0, [TELEMETRY_WARNING])


# -- every error_at rule names its key in its text ------------------------------------------------


def _set(path: str, value: Any, start: Callable[[], dict[str, Any]] = plain) -> dict[str, Any]:
    data = start()
    *parents, last = path.split(".")
    node = data
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return data


def _pd_with(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    data = prefill_decode()
    change(data)
    return data


def _heterogeneous_with(change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    data = heterogeneous()
    change(data)
    return data


# (the path the error's own text starts with, the full path the CLI line starts with, the config)
AT_PATH_RULES: dict[str, tuple[str, str, Callable[[], dict[str, Any]]]] = {
    "pd rpc ports equal": (
        "decode.data_parallel_rpc_port",
        "services.pd.decode.data_parallel_rpc_port",
        lambda: _pd_with(lambda d: d["services"]["pd"]["decode"].update(data_parallel_rpc_port=13345)),
    ),
    "pair setting on a tier": (
        "prefill.server_per_node",
        "services.pd.prefill.server_per_node",
        lambda: _pd_with(lambda d: d["services"]["pd"]["prefill"].update(server_per_node=True)),
    ),
    "array in a heterogeneous job": (
        "extra_args.array",
        "compute.cluster.extra_args.array",
        lambda: _heterogeneous_with(lambda d: d["compute"]["cluster"].update(extra_args={"array": "1-3"})),
    ),
    "empty command": (
        "command",
        "driver.benchmarks.answer-judge.command",
        lambda: _set("driver.benchmarks.answer-judge.command", "  "),
    ),
    "command with resumable": (
        "command",
        "driver.benchmarks.answer-judge.command",
        lambda: _set("driver.benchmarks.answer-judge", {"command": "echo", "resumable": True}),
    ),
    "job export setting": (
        "job.export.wandb.mode",
        "job.export.wandb.mode",
        lambda: _set("job.export", {"wandb": {"mode": "sometimes"}}),
    ),
    "benchmark export setting": (
        "driver.benchmarks.answer-judge.export.table.dir",
        "driver.benchmarks.answer-judge.export.table.dir",
        lambda: _set("driver.benchmarks.answer-judge.export", {"table": {"dir": ""}}),
    ),
    "vllm without a pool in a heterogeneous job": (
        "services.policy.node_pool",
        "services.policy.node_pool",
        lambda: _heterogeneous_with(lambda d: d["services"]["policy"].pop("node_pool")),
    ),
    "tier name taken": (
        "services.pd",
        "services.pd",
        lambda: _pd_with(
            lambda d: d["services"].update(
                {"pd-prefill": {"type": "vllm", "container": "c", "model": "x", "node_pool": "router", "port": 9000}}
            )
        ),
    ),
    "tier without a pool": (
        "services.pd.prefill.node_pool",
        "services.pd.prefill.node_pool",
        lambda: _pd_with(lambda d: d["services"]["pd"]["prefill"].pop("node_pool")),
    ),
    "server_per_node with instances": (
        "services.pd.prefill.number_of_instances",
        "services.pd.prefill.number_of_instances",
        lambda: _pd_with(
            lambda d: (
                d["services"]["pd"].update(server_per_node=True),
                d["services"]["pd"]["prefill"].update(number_of_instances=4),
            )
        ),
    ),
    "router away from the driver": (
        "services.pd.node_pool",
        "services.pd.node_pool",
        lambda: _pd_with(
            lambda d: (d["services"]["pd"].update(node_pool="decode"), d["driver"].update(policy_model=None))
        ),
    ),
    "command beside run settings": (
        "driver.benchmarks.answer-judge.command",
        "driver.benchmarks.answer-judge.command",
        lambda: _set("driver.benchmarks.answer-judge", {"command": "echo", "run": {"limit": 5}}),
    ),
    "shards of a shared deployment": (
        "job.shards",
        "job.shards",
        lambda: _set("job.shards", 2, lambda: _set("job.deployment", "shared")),
    ),
    "shards of a command": (
        "driver.benchmarks.answer-judge.shards",
        "driver.benchmarks.answer-judge.shards",
        lambda: _set("driver.benchmarks.answer-judge", {"command": "echo", "shards": 2}),
    ),
    "shards of a resumable benchmark": (
        "driver.benchmarks.answer-judge.shards",
        "driver.benchmarks.answer-judge.shards",
        lambda: _set("driver.benchmarks.answer-judge", {"resumable": True, "shards": 2}),
    ),
    "shards of a limit that is no number": (
        "driver.benchmarks.answer-judge.run.limit",
        "driver.benchmarks.answer-judge.run.limit",
        lambda: _set("driver.benchmarks.answer-judge", {"run": {"limit": "all"}, "shards": 2}),
    ),
    "what one Kubernetes pod cannot run": (
        "services.policy.use_ray_serve",
        "services.policy.use_ray_serve",
        lambda: _set(
            "services.policy.use_ray_serve",
            True,
            lambda: _set("compute", {"k8s": {"type": "kubernetes", "pvc_name": "results"}}),
        ),
    ),
    "shards under a glob's output path": (
        "job.output_path",
        "job.output_path",
        lambda: _set("job.output_path", "/runs/[a]", lambda: _set("job.shards", 3)),
    ),
}


def _error_at_call_sites() -> set[tuple[str, int, int]]:
    """(file, first line, last line) of every ``error_at(...)`` call in the package's source."""
    sites = set()
    for path in PACKAGE_DIR.rglob("*.py"):
        if path.name == "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "error_at":
                sites.add((str(path), node.lineno, node.end_lineno or node.lineno))
    return sites


def test_every_error_at_call_site_has_a_case(monkeypatch) -> None:
    fired: set[tuple[str, int]] = set()
    original = errors.error_at

    def recording(path: str, message: str) -> Exception:
        caller = inspect.stack()[1]
        fired.add((str(Path(caller.filename)), caller.lineno))
        return original(path, message)

    for module in list(__import__("sys").modules.values()):
        if (
            getattr(module, "__name__", "").startswith(package.__name__)
            and getattr(module, "error_at", None) is original
        ):
            monkeypatch.setattr(module, "error_at", recording)
    for _, _, make in AT_PATH_RULES.values():
        validation_error(make())
    sites = _error_at_call_sites()
    assert len(sites) >= 13  # the walk finds the calls (a rename of the helper must not empty it)
    # A frame's line of a call spanning lines differs between Python versions: any of its lines.
    unwalked = {(f, first) for f, first, last in sites if not any(f == g and first <= n <= last for g, n in fired)}
    assert unwalked == set()


@pytest.mark.parametrize("rule", list(AT_PATH_RULES))
def test_the_error_text_names_its_path_at_the_api_and_once_on_the_cli(rule: str) -> None:
    at, full, make = AT_PATH_RULES[rule]
    messages = [e["msg"] for e in validation_error(make()).errors() if e["type"] == errors.AT_PATH_ERROR]
    assert messages and messages[0].startswith(f"{at}: ")
    assert f"{at}: " in str(validation_error(make()))
    (line,) = cli_lines(make())
    assert line.startswith(f"{full}: ") and f"{full}: {at}: " not in line and not line[len(full) + 2 :].startswith(at)


def test_a_policy_host_from_the_environment_at_the_api_names_the_runtime_fix() -> None:
    data = _set("driver.policy_host", "${oc.env:HEAD_NODE_IP}")
    (line,) = cli_lines(data)
    assert line.startswith("driver.policy_host: ") and "write 'runtime:HEAD_NODE_IP'" in line
    assert "runtime:HEAD_NODE_IP" in str(validation_error(data))


# -- a vllm_pd router pinned to a later pool: kept (0.7.0 refuses), driver and router move together ---


def test_a_router_pinned_to_a_later_pool_runs_on_the_drivers_node() -> None:
    from nemo_gym.orchestration.plan.building import build_plan

    data = prefill_decode()
    pools = data["compute"]["cluster"]["node_pools"]
    data["compute"]["cluster"]["node_pools"] = {"first": {"partition": "p"}, **pools}
    data["services"]["pd"]["node_pool"] = "router"
    job = build_plan(SubmitConfig.model_validate(data), "gym-job-20260101T000000Z-abcdef").jobs[0]
    (router,) = [step for step in job.steps if step.service == "pd" and step.name == "pd"]
    assert router.nodes.start == job.driver.node == 1  # the router pool's node, not the first pool's


def test_a_router_pinned_away_from_the_driver_is_still_refused() -> None:
    data = prefill_decode()
    data["services"]["pd"]["node_pool"] = "decode"
    data["driver"]["policy_model"] = None  # the driver stays on the first pool
    (line,) = cli_lines(data)
    assert line.startswith(
        "services.pd.node_pool: is 'decode', but a vllm_pd service's router runs on the driver's node"
    )


def test_no_benchmark_is_refused_naming_the_fix() -> None:
    (line,) = cli_lines(_set("driver.benchmarks", {}))
    assert line == "driver.benchmarks: no benchmark is declared; add at least one, e.g. benchmarks: {answer-judge: {}}"


# -- a misspelt override of an existing key: "did you mean" first, '+' only for a new key ----------


@pytest.mark.parametrize(
    "override, line",
    [
        (
            "services.policy.served_model_nam=x",
            "error: override 'services.policy.served_model_nam=x': services.policy.served_model_nam is not in the "
            "config; did you mean 'served_model_name' (services.policy.served_model_name)?",
        ),
        (
            "services.polcy.model=x",
            "error: override 'services.polcy.model=x': services.polcy.model is not in the config; did you mean "
            "'policy' (services.policy.model)?",
        ),
        (
            "services.policy.tokenizer=x",
            "error: override 'services.policy.tokenizer=x': services.policy.tokenizer is not in the config; write "
            "'+services.policy.tokenizer=x' to add it",
        ),
    ],
)
def test_a_misspelt_override_is_answered_with_the_key_it_misspells(capsys, tmp_path, override, line) -> None:
    data = plain()
    data["services"]["policy"]["served_model_name"] = "served"
    code, _, lines = submit(capsys, data, tmp_path, "--resolve-only", override)
    assert (code, lines) == (1, [line])


def test_a_near_key_added_by_a_fragment_is_suggested_too(capsys, tmp_path) -> None:
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "mine.yaml").write_text("# @package _global_\njob:\n  benchmarks_at_once: 2\n")
    data = {"defaults": ["_self_", {"cluster": "mine"}], **plain()}
    code, _, lines = submit(capsys, data, tmp_path, "--resolve-only", "job.benchmarks_at_onc=3")
    assert code == 1 and lines[0].endswith("did you mean 'benchmarks_at_once' (job.benchmarks_at_once)?")


# -- run/prepare keys checked against what gym 0.7.0 reads, where a run is staged ---------------------

BENCH = "driver.benchmarks.answer-judge"


@pytest.mark.parametrize(
    "override, line",
    [
        (
            "run.num_repeat=2",
            f"error: {BENCH}.run.num_repeat: gym eval run reads no such key; did you mean 'num_repeats'? (to pass it "
            f"as written, add 'run.num_repeat' to {BENCH}.unchecked_keys)",
        ),
        (
            "run.responses_create_params.temprature=1.0",
            f"error: {BENCH}.run.responses_create_params.temprature: gym eval run reads no such key; did you mean "
            f"'temperature'? (to pass it as written, add 'run.responses_create_params.temprature' to {BENCH}.unchecked_keys)",
        ),
        (
            "run.limt=5",
            f"error: {BENCH}.run.limt: gym eval run reads no such key; did you mean 'limit'? (to pass it as written, "
            f"add 'run.limt' to {BENCH}.unchecked_keys)",
        ),
        (
            "run.num_repeats=two",
            f"error: {BENCH}.run.num_repeats: gym eval run reads a whole number or a mapping here, got 'two'; give a "
            f"whole number or a mapping",
        ),
        (
            "run.responses_create_params.max_output_tokens=lots",
            f"error: {BENCH}.run.responses_create_params.max_output_tokens: gym eval run reads a whole number here, "
            f"got 'lots'; give a whole number",
        ),
        (
            "run.split=test",
            f"error: {BENCH}.run.split: gym eval run reads one of 'train', 'validation', 'benchmark' here, got 'test'; "
            f"give one of 'train', 'validation', 'benchmark'",
        ),
        (
            "prepare.use_cached_prepared_benchmark=true",
            f"error: {BENCH}.prepare.use_cached_prepared_benchmark: gym eval prepare reads no such key; did you mean "
            f"'use_cached_prepared_benchmarks'? (to pass it as written, add 'prepare.use_cached_prepared_benchmark' to "
            f"{BENCH}.unchecked_keys)",
        ),
    ],
)
def test_a_near_miss_or_a_wrong_kind_is_refused_where_a_run_is_staged(capsys, tmp_path, override, line) -> None:
    code, _, lines = submit(capsys, plain(), tmp_path, "--dry-run", f"++{BENCH}.{override}")
    assert (code, lines) == (1, [line])


def test_gym_keys_are_not_the_schemas_business(capsys, tmp_path) -> None:
    # 0.7.0's models take any run mapping: so do ours, and --resolve-only prints it as written.
    code, out, lines = submit(capsys, plain(), tmp_path, "--resolve-only", f"++{BENCH}.run.num_repeat=2")
    assert (code, lines) == (0, [])
    assert yaml.safe_load(out)["driver"]["benchmarks"]["answer-judge"]["run"]["num_repeat"] == 2


def test_submit_refuses_before_it_connects() -> None:
    from nemo_gym.orchestration.library import prepare
    from nemo_gym.orchestration.library import submit as submit_run

    data = _set(f"{BENCH}.run", {"limt": 5})

    def connect(host: str | None) -> Any:
        raise AssertionError("submit connected despite a misspelt run key")

    with pytest.raises(UserError) as info:
        submit_run(prepare(SubmitConfig.model_validate(data)), connect=connect)
    assert info.value.problems[0].startswith(f"{BENCH}.run.limt: gym eval run reads no such key; did you mean 'limit'?")


def test_every_problem_of_every_benchmark_is_listed() -> None:
    from nemo_gym.orchestration.library import prepare

    data = _set(
        "driver.benchmarks",
        {"a": {"run": {"limt": 5, "num_repeats": "x"}}, "b": {"prepare": {"prepare_script_arg": {}}}},
    )
    with pytest.raises(UserError) as info:
        prepare(SubmitConfig.model_validate(data))
    assert [line.split(":")[0] for line in info.value.problems] == [
        "driver.benchmarks.a.run.limt",
        "driver.benchmarks.a.run.num_repeats",
        "driver.benchmarks.b.prepare.prepare_script_arg",
    ]


@pytest.mark.parametrize(
    "run",
    [
        {"num_repeats": 2, "responses_create_params": {"temperature": 1.0}, "limit": 5},
        {"num_repeats": {"_default": 2}, "limit": None, "num_samples_in_parallel": "8"},  # as gym coerces
        {"responses_create_params": {"temperature": 1, "top_p": 0.95, "max_output_tokens": 4096}},
        {"my_judge": {"responses_api_models": {"url": "http://judge"}}, "seed_everything": True},  # far from any key
    ],
)
def test_what_gym_reads_and_what_is_far_from_it_passes(capsys, tmp_path, run) -> None:
    assert submit(capsys, _set(f"{BENCH}.run", run), tmp_path, "--dry-run")[::2] == (0, [])


def test_unchecked_keys_pass_a_near_miss_to_gym_as_written() -> None:
    from nemo_gym.orchestration.library import prepare

    data = _set(
        f"{BENCH}",
        {
            "run": {"num_repeat": "two", "responses_create_params": {"top_k": 20}},
            "unchecked_keys": ["run.num_repeat", "run.responses_create_params.top_k"],
        },
    )
    argv = prepare(SubmitConfig.model_validate(data)).runs[0].plan.jobs[0].driver.run_argv
    assert '+num_repeat="two"' in argv and "+responses_create_params.top_k=20" in argv


def test_an_unchecked_key_outside_run_and_prepare_is_refused() -> None:
    (line,) = cli_lines(_set(f"{BENCH}.unchecked_keys", ["num_repeat"]))
    assert line == (
        f"{BENCH}.unchecked_keys: 'num_repeat' names no run or prepare key; write it as run.<key> or "
        f"prepare.<key>, e.g. run.num_repeat"
    )


def test_the_keys_are_kept_as_data_with_the_gym_version_they_come_from() -> None:
    from nemo_gym.orchestration import gym_eval_keys as keys

    assert keys.GYM_VERSION == "0.7.0"
    assert {
        "num_repeats",
        "limit",
        "num_samples_in_parallel",
        "split",
        "input_jsonl_fpath",
        "resume_from_cache",
    } <= set(keys.RUN_KEYS)
    assert {"temperature", "top_p", "max_output_tokens"} <= set(keys.RESPONSES_CREATE_PARAMS_KEYS)
    assert {"use_cached_prepared_benchmarks", "prepare_script_args"} <= set(keys.PREPARE_KEYS)
    # The policy wiring every benchmark's run receives is gym's own key, never a near miss.
    assert {"policy_base_url", "policy_model_name", "policy_api_key"} <= set(keys.RUN_KEYS)


def test_a_request_parameter_written_as_a_number_gets_one_line_not_a_traceback() -> None:
    from nemo_gym.orchestration.library import prepare

    data = _set(f"{BENCH}.run", {"responses_create_params": {1: 2, "temperature": 0.5}})
    with pytest.raises(UserError) as info:  # the key check passes it (far from every name); Hydra cannot
        prepare(SubmitConfig.model_validate(data))
    assert info.value.problems == [
        "run/prepare key 'run.responses_create_params.1' cannot be passed as a Hydra override; use letters, digits, '_' and '-'"
    ]
