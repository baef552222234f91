"""Hostile input, generated: any config that validates renders scripts that bash and shellcheck
accept, and every user string reaches its program as exactly the intended argument (proved by
running the rendered job with the local launcher and recording stand-ins); any config that does
not validate fails with clean lines, never a traceback."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import time
import warnings
from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from omegaconf import OmegaConf

from nemo_gym.orchestration.backends.slurm_rules import walltime_seconds
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.plan.building import build_plan
from nemo_gym.orchestration.render import render_run
from nemo_gym.orchestration.resume import _arguments
from nemo_gym.orchestration.stage import write_staged
from nemo_gym.orchestration.validate import validate_config

STANDINS = Path(__file__).resolve().parents[1] / "standins"
PATH = f"{STANDINS}:/usr/local/bin:/usr/bin:/bin"
PARSER = OverridesParser.create()

# Any printable text, quotes, $, backquotes, backslashes, spaces and unicode included.
nasty = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=24).filter(str.strip)
with_newlines = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=24)
words = st.lists(st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=10), max_size=4)
run_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | nasty,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,5}", fullmatch=True), inner, max_size=2)
    ),
    max_leaves=6,
)


@st.composite
def configs(draw):
    # One line, and not an option to vLLM (a leading '-' is refused: rules.not_an_option).
    argument = nasty.filter(lambda s: "\n" not in s and "\r" not in s and not s.startswith("-"))
    model = draw(argument)
    served = draw(argument)
    extra = draw(words)
    env_value = draw(with_newlines)
    run = draw(st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True), run_values, max_size=3))
    run = {k: v for k, v in run.items() if not k.startswith("policy_")}
    return (
        {
            "services": {
                "policy": {
                    "type": "vllm",
                    "container": "unused",
                    "model": model,
                    "served_model_name": served,
                    "port": 18240,
                    "extra_args": shlex.join(extra),
                    "env": {"PATH": f"lit:{PATH}", "HF_USER_VALUE": f"lit:{env_value}"},
                }
            },
            "compute": {"here": {"type": "local"}},
            "driver": {"policy_model": "policy", "env": {"PATH": f"lit:{PATH}"}, "benchmarks": {"b": {"run": run}}},
            "job": {"output_path": "/tmp/unused"},
            "otel": {"enabled": False},
        },
        extra,
        env_value,
    )


def _validated(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return validate_config(data)[0]


def _run_locally(job_dir: Path, job_id: str, timeout: float = 30) -> None:
    env = {**os.environ, "GYM_JOB_ID": job_id}
    proc = subprocess.run(["bash", str(job_dir / "job.sh")], capture_output=True, text=True, env=env, timeout=timeout)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def _gym_sees(tokens: list[str]) -> dict:
    cfg = OmegaConf.create({})
    for override in PARSER.parse_overrides(tokens):
        OmegaConf.update(cfg, override.key_or_group, override.value(), force_add=True)
    return OmegaConf.to_container(cfg, resolve=True)


def _ports_file(job_dir: Path) -> Path:
    [found] = job_dir.glob(".gym/*/ports")
    return found


CASES = {"run": 0}


@pytest.mark.slow
@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(configs())
def test_any_valid_config_renders_sound_scripts_whose_arguments_arrive_exactly(tmp_path_factory, case) -> None:
    data, extra, env_value = case
    CASES["run"] += 1
    root = tmp_path_factory.mktemp("case")
    data["job"]["output_path"] = str(root)
    config = _validated(data)
    plan = build_plan(config, f"gym-job-20260101T000000Z-{CASES['run']:06x}")
    staged = render_run(plan)
    scripts = [f.content for rel, f in staged.files.items() if rel.endswith(".sh")]
    for script in scripts:
        assert subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True).returncode == 0
    if shutil.which("shellcheck"):
        for script in scripts:
            proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, text=True, capture_output=True)
            assert proc.returncode == 0, proc.stdout
    write_staged(staged, plan.run_dir)
    job = plan.jobs[0]
    job_dir = Path(job.job_dir)
    _run_locally(job_dir, job.local_job_id)
    [vllm] = [json.loads(p.read_text()) for p in (job_dir / "standin").glob("vllm-*.json")]
    service = config.services["policy"]
    assert vllm["argv"][:2] == ["serve", service.model]
    assert vllm["argv"][vllm["argv"].index("--served-model-name") + 1] == service.served_model_name
    assert vllm["argv"][len(vllm["argv"]) - len(extra) :] == extra or not extra
    assert vllm["env"]["HF_USER_VALUE"] == env_value
    [driver] = [json.loads(p.read_text()) for p in (job_dir / "standin").glob("gym-run-*.json")]
    overrides = [a for a in driver["argv"] if a.startswith("+")]
    seen = _gym_sees(overrides)
    expected = {**config.driver.benchmarks["b"].run, "output_jsonl_fpath": job.driver.rollouts_path}
    if job.ports:  # claimed when the job started: the driver is told those, as the server was
        claimed = dict(line.split("=") for line in _ports_file(job_dir).read_text().split())
        port = claimed["GYM_PORT_POLICY"]
        assert vllm["argv"][vllm["argv"].index("--port") + 1] == port
        expected["policy_base_url"] = expected["policy_base_url"].replace(f":{service.port}/", f":{port}/")
        expected["head_server"] = {"port": int(claimed["GYM_PORT_GYM_HEAD_SERVER"])}
    assert seen == expected
    time.sleep(0.2)  # the port is free again before the next case


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "services",
                        "compute",
                        "driver",
                        "job",
                        "otel",
                        "type",
                        "model",
                        "port",
                        "env",
                        "benchmarks",
                        "policy",
                        "node_pools",
                        "nodes",
                        "x",
                        "vllm",
                        "slurm",
                        "account",
                        "output_path",
                        "container",
                    ]
                ),
                inner,
                max_size=5,
            )
        ),
        max_leaves=20,
    )
)
def test_any_invalid_config_fails_cleanly(data) -> None:
    try:
        _validated(data if isinstance(data, dict) else {"services": data})
    except UserError as exc:
        assert exc.problems and all(isinstance(p, str) and p and "\n" not in p for p in exc.problems)


slurm_times = st.one_of(
    st.integers(1, 10**6).map(str),
    st.tuples(st.integers(0, 99), st.integers(0, 59), st.integers(0, 59)).map(
        lambda t: "{:02d}:{:02d}:{:02d}".format(*t)
    ),
    st.tuples(st.integers(0, 30), st.integers(0, 23), st.integers(0, 59)).map(lambda t: "{}-{:02d}:{:02d}".format(*t)),
).filter(lambda t: walltime_seconds(t) > 0)


@settings(max_examples=25, deadline=None)
@given(
    retries=st.integers(0, 10**6),
    cap=st.none() | slurm_times,
    flag=st.booleans(),
    model=nasty.filter(lambda s: "\n" not in s and "\r" not in s and not s.startswith("-")),  # rules.not_an_option
    run=st.dictionaries(st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True), run_values, max_size=3),
)
def test_any_valid_resumable_config_renders_sound_scripts(retries, cap, flag, model, run) -> None:
    run = {k: v for k, v in run.items() if not k.startswith("policy_") and k != "resume_from_cache"}
    resumable = True if flag else {"max_retries": retries, "max_walltime": cap}
    data = {
        "services": {"policy": {"type": "vllm", "container": "c", "model": model}},
        "compute": {"c": {"type": "slurm", "account": "a", "walltime": "1"}},
        "driver": {"policy_model": "policy", "benchmarks": {"b": {"run": run, "resumable": resumable}}},
        "job": {"output_path": "/tmp/unused"},
        "otel": {"enabled": False},
    }
    config = _validated(data)
    plan = build_plan(config, "gym-job-20260101T000000Z-000001")
    staged = render_run(plan)
    resume = staged.files["b/steps/resume.sh"].content
    # The caps reach the judge exactly: call it with a python3 that only prints its arguments.
    shown = subprocess.run(
        ["bash", "-c", resume + '\npython3() { printf "%s\\n" "$@"; }\ngym_resume begin 7 0'],
        capture_output=True,
        text=True,
        env={**os.environ, "GYM_JOB_DIR": "/j"},
    ).stdout.splitlines()
    caps, scheduler, rest = _arguments(shown[5:])
    assert shown[:5] == ["-E", "-s", "/j/steps/py/gym_run.py", "nemo_gym.orchestration.resume", "begin"]
    assert rest == ["7", "0"]
    assert scheduler == "slurm_node"
    assert caps.max_retries == (3 if flag else retries)
    assert caps.max_walltime_seconds == (walltime_seconds(cap) if cap and not flag else 0)
    assert caps.max_walltime == ("" if flag or cap is None else cap)
    assert "+resume_from_cache=true" in staged.files["b/steps/driver.sh"].content
    for rel, f in staged.files.items():
        if rel.endswith(".sh"):
            assert subprocess.run(["bash", "-n"], input=f.content, text=True, capture_output=True).returncode == 0
            if shutil.which("shellcheck"):
                proc = subprocess.run(
                    ["shellcheck", "-s", "bash", "-"], input=f.content, text=True, capture_output=True
                )
                assert proc.returncode == 0, proc.stdout
