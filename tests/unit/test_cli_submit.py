"""`gym eval submit`: composing, overrides, --resolve-only, and one clear line per bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from nemo_gym.orchestration.cli.main import main


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["eval", "submit", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("error: ")]


# -- bad inputs: non-zero exit, one short line per problem, naming where and what to do -----------


def test_missing_file(capsys, tmp_path) -> None:
    code, _, err = run_cli(capsys, "-c", str(tmp_path / "nope.yaml"), "--resolve-only")
    assert code == 1
    assert error_lines(err) == [f"error: {tmp_path / 'nope.yaml'}: no such file; check the path given to -c/--config"]


def test_directory_instead_of_file(capsys, tmp_path) -> None:
    code, _, err = run_cli(capsys, "-c", str(tmp_path), "--resolve-only")
    assert code == 1 and "is a directory, not a file" in err


def test_empty_file(capsys, write_config) -> None:
    code, _, err = run_cli(capsys, "-c", str(write_config("")), "--resolve-only")
    assert code == 1
    assert "the file is empty; it needs the keys services, compute, driver, job" in err


def test_yaml_syntax_error_names_line(capsys, write_config) -> None:
    path = write_config("services:\n  policy: {type: vllm\njob: x\n")
    code, _, err = run_cli(capsys, "-c", str(path), "--resolve-only")
    assert code == 1
    [line] = error_lines(err)
    assert f"{path}:3:" in line and "YAML syntax error" in line


def test_list_at_top_level(capsys, write_config) -> None:
    code, _, err = run_cli(capsys, "-c", str(write_config("- a\n- b\n")), "--resolve-only")
    assert code == 1 and "the top level must be a mapping with the keys" in err and "but it is a list" in err


def test_list_where_a_mapping_belongs(capsys, write_config, base) -> None:
    base["services"] = ["policy"]
    code, _, err = run_cli(capsys, "-c", str(write_config(base)), "--resolve-only")
    assert code == 1
    assert error_lines(err) == ["error: services: expected a mapping (key: value lines), got a list"]


def test_unknown_key_did_you_mean(capsys, write_config, base) -> None:
    base["services"]["policy"]["tensor_paralel_size"] = 2
    code, _, err = run_cli(capsys, "-c", str(write_config(base)), "--resolve-only")
    assert code == 1
    assert error_lines(err) == [
        "error: services.policy.tensor_paralel_size: unknown key; did you mean 'tensor_parallel_size'?"
    ]


def test_unknown_top_level_key(capsys, write_config, base) -> None:
    base["serivces"] = {}
    code, _, err = run_cli(capsys, "-c", str(write_config(base)), "--resolve-only")
    assert "error: serivces: unknown key; did you mean 'services'?" in err


def test_wrong_type(capsys, write_config, base) -> None:
    base["services"]["policy"]["tensor_parallel_size"] = "two"
    code, _, err = run_cli(capsys, "-c", str(write_config(base)), "--resolve-only")
    assert code == 1
    assert error_lines(err) == ["error: services.policy.tensor_parallel_size: expected a whole number, got 'two'"]


def test_missing_required_keys_each_named(capsys, write_config, base) -> None:
    del base["services"]["policy"]["model"]
    del base["job"]
    code, _, err = run_cli(capsys, "-c", str(write_config(base)), "--resolve-only")
    assert code == 1
    assert error_lines(err) == [
        "error: job: required key is missing; add it (job: {output_path: ...})",
        "error: services.policy.model: required key is missing; add it (the model path or Hugging Face name to serve)",
    ]


def test_missing_service_type(capsys, write_config, base) -> None:
    del base["services"]["policy"]["type"]
    code, _, err = run_cli(capsys, "-c", str(write_config(base)), "--resolve-only")
    assert error_lines(err) == [
        "error: services.policy.type: required key is missing; set type to one of: vllm, ray, vllm_pd"
    ]


def test_bad_service_type(capsys, write_config, base) -> None:
    base["services"]["policy"]["type"] = "sglang"
    code, _, err = run_cli(capsys, "-c", str(write_config(base)), "--resolve-only")
    assert error_lines(err) == [
        "error: services.policy.type: 'sglang' is not a known type; use one of: vllm, ray, vllm_pd"
    ]


def test_nested_compute_path_has_no_union_tag(capsys, write_config, base) -> None:
    base["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "p", "nodes": 0}}
    code, _, err = run_cli(capsys, "-c", str(write_config(base)), "--resolve-only")
    assert error_lines(err) == ["error: compute.cluster.node_pools.gpu.nodes: must be >= 1, got 0"]


def test_cross_field_rule(capsys, write_config, base) -> None:
    base["driver"]["policy_model"] = "judge"
    code, _, err = run_cli(capsys, "-c", str(write_config(base)), "--resolve-only")
    assert code == 1
    assert error_lines(err) == [
        "error: driver.policy_model 'judge' does not match any service (policy); name one of the services."
    ]


def test_job_tags_are_kept_each_once_and_a_tag_that_cannot_be_stored_is_one_line(capsys, write_config, base) -> None:
    path = write_config(base)
    assert resolved(capsys, path, "++job.tags=[exp-a,lr:3e-4,exp-a]")["job"]["tags"] == ["exp-a", "lr:3e-4"]
    code, _, err = run_cli(capsys, "-c", str(path), "--resolve-only", "++job.tags=['exp a']")
    assert code == 1
    [line] = error_lines(err)
    assert line.startswith("error: job.tags: tag 0 ('exp a') must be 1-64 letters, digits or")


def test_idle_gpu_warning_is_one_line(capsys, write_config, base) -> None:
    base["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "p", "gpus_per_node": 8}}
    code, _, err = run_cli(capsys, "-c", str(write_config(base)), "--resolve-only")
    assert code == 0
    warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
    assert len(warnings) == 1 and "leaving 7 GPU(s) idle" in warnings[0]
    assert err.count("\n") == 1


# -- overrides ----------------------------------------------------------------------------------


def resolved(capsys, path, *overrides):
    code, out, err = run_cli(capsys, "-c", str(path), "--resolve-only", "--json", *overrides)
    assert code == 0, err
    return json.loads(out)


def test_overrides_follow_hydra(capsys, write_config, base) -> None:
    path = write_config(base)
    data = resolved(
        capsys,
        path,
        "services.policy.model=/models/x y",
        "+services.policy.extra_args='--max-model-len 8192, --seed 1'",
        "+driver.benchmarks.answer-judge.run.items=[1,'a b',{k: v}]",
        "++driver.benchmarks.answer-judge.run.limit=null",
        "~otel.enabled",
        "+otel.gym_telemetry=false",
    )
    assert data["services"]["policy"]["model"] == "/models/x y"
    assert data["services"]["policy"]["extra_args"] == "--max-model-len 8192, --seed 1"
    assert data["driver"]["benchmarks"]["answer-judge"]["run"] == {"items": [1, "a b", {"k": "v"}], "limit": None}
    assert data["otel"]["enabled"] is True  # deleted from the file, so the default applies


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "services.policy.nope=1",
            "override 'services.policy.nope=1': services.policy.nope is not in the config; write '+services.policy.nope=1' to add it",
        ),
        ("+services.policy.model=x", "services.policy.model already exists; drop the '+' to change it, or use '++'"),
        ("~services.policy.nope", "services.policy.nope is not in the config, so it cannot be deleted"),
        ("services.policy.model=[1,", "override 'services.policy.model=[1,': cannot be parsed"),
        ("+_scratch.x=1", "scratch namespace '_scratch' must be defined in the config file"),
    ],
)
def test_bad_overrides(capsys, write_config, base, override, message) -> None:
    code, _, err = run_cli(capsys, "-c", str(write_config(base)), "--resolve-only", override)
    assert code == 1
    [line] = error_lines(err)
    assert message in line


def test_interpolation_and_scratch_namespace(capsys, write_config, base, monkeypatch) -> None:
    monkeypatch.setenv("GYM_TEST_ACCOUNT", "from-env")
    base["_cluster"] = {"account": "${oc.env:GYM_TEST_ACCOUNT}"}
    base["compute"]["cluster"]["account"] = "${_cluster.account}"
    data = resolved(capsys, write_config(base))
    assert data["compute"]["cluster"]["account"] == "from-env"
    assert "_cluster" not in data


def test_unresolvable_interpolation(capsys, write_config, base, monkeypatch) -> None:
    monkeypatch.delenv("GYM_TEST_NOPE", raising=False)
    base["compute"]["cluster"]["account"] = "${oc.env:GYM_TEST_NOPE}"
    code, _, err = run_cli(capsys, "-c", str(write_config(base)), "--resolve-only")
    assert code == 1
    [line] = error_lines(err)
    assert "GYM_TEST_NOPE" in line and "fix the interpolation" in line


def test_defaults_list_composes_fragments(capsys, tmp_path, base) -> None:
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "mine.yaml").write_text(
        "# @package _global_\notel:\n  endpoint: https://o\n  service_name: s\n  gym_telemetry: false\n"
    )
    base["defaults"] = ["_self_", {"cluster": "mine"}]
    del base["otel"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(base, sort_keys=False))
    data = resolved(capsys, tmp_path / "config.yaml")
    assert data["otel"]["endpoint"] == "https://o" and data["otel"]["enabled"] is True


# -- --resolve-only ---------------------------------------------------------------------------------


def test_resolve_only_round_trips_and_hides_host_secrets(capsys, write_config, base, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("GYM_TEST_SECRET", "hunter2-very-secret")
    base["services"]["policy"]["env"] = {"TOKEN": "host:GYM_TEST_SECRET", "LIT": "lit:runtime:X", "RT": "runtime:HOME"}
    base["driver"]["policy_model"] = "policy"
    code, first, err = run_cli(capsys, "-c", str(write_config(base)), "--resolve-only")
    assert code == 0, err
    assert "hunter2" not in first + err
    again = tmp_path / "again.yaml"
    again.write_text(first)
    code, second, err = run_cli(capsys, "-c", str(again), "--resolve-only")
    assert code == 0, err
    assert second == first
    env = yaml.safe_load(first)["services"]["policy"]["env"]
    assert env == {"TOKEN": "host:GYM_TEST_SECRET", "LIT": "lit:runtime:X", "RT": "runtime:HOME"}


def test_examples_validate(capsys, monkeypatch) -> None:
    monkeypatch.setenv("GYM_ENVS_DIR", "/opt/gym-envs")  # the quickstart reads where its environments are
    monkeypatch.setenv("HF_TOKEN", "hf_example")  # prefill-decode.yaml carries it with host:
    examples = Path(__file__).resolve().parents[2] / "examples"
    paths = sorted(examples.glob("*.yaml"))
    assert len(paths) >= 3
    for path in paths:
        code, _, err = run_cli(capsys, "-c", str(path), "--resolve-only")
        assert code == 0, f"{path.name}: {err}"


# -- never a traceback --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[",
        "a: [1, 2",
        "services: 3",
        "- 1",
        "services: {p: {type: vllm}}",
        "\x00\x01",
        "job: {output_path: ${nope}}",
    ],
)
def test_no_traceback_for_any_input(tmp_path, text) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    proc = subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "submit", "-c", str(path), "--resolve-only"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith("error: ")
    assert all(len(line) < 400 for line in proc.stderr.splitlines())


def test_duplicate_keys_are_refused_with_the_line(capsys, write_config) -> None:
    path = write_config("services: {}\njob: {output_path: /a}\njob: {output_path: /b}\n")
    code, _, err = run_cli(capsys, "-c", str(path), "--resolve-only")
    assert code == 1
    assert error_lines(err) == [
        f"error: {path}:3: the key 'job' appears twice in the same mapping (lines 2 and 3); keep one"
    ]


def test_fast_path_composes_like_hydra(monkeypatch) -> None:
    """Without overrides or a defaults list the file is not run through Hydra; same result."""
    from nemo_gym.orchestration.compose import _hydra_compose, compose_config

    monkeypatch.setenv("GYM_ENVS_DIR", "/opt/gym-envs")
    repo = Path(__file__).resolve().parents[2]
    paths = [*repo.glob("examples/*.yaml"), *repo.glob("tests/golden/configs/*.yaml")]
    checked = 0
    for path in paths:
        hydra = {k: v for k, v in _hydra_compose(path, []).items() if not k.startswith("_")}
        hydra.pop("defaults", None)
        assert compose_config(path, []) == hydra, path.name
        checked += 1
    assert checked >= 8
