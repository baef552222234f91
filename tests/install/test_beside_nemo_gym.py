"""Installed the way the README says — in an environment of its own — next to NeMo Gym 0.7.0,
whose package also installs a `gym` command and a regular `nemo_gym` package: our own command
name still reaches our CLI, whichever `gym` comes first on PATH."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENVS = Path(os.environ.get("GYM_ENVS_DIR", Path.home() / ".cache" / "gym-orchestration" / "envs"))
NEMO_GYM_BIN = ENVS / "gym" / "bin"


@pytest.fixture(scope="module")
def tool_env(tmp_path_factory) -> Path:
    """What `pipx install` / `uv tool install` make: a venv of its own with the package installed."""
    if not (NEMO_GYM_BIN / "gym").exists():
        if os.environ.get("GYM_REQUIRE_CLUSTER") == "1":
            pytest.fail(f"NeMo Gym 0.7.0's environment is missing ({NEMO_GYM_BIN}); scripts/setup-envs builds it")
        pytest.skip("no NeMo Gym environment (scripts/setup-envs)")
    venv = tmp_path_factory.mktemp("tool") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    proc = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "--quiet", "--disable-pip-version-check", str(REPO)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return venv


def run_with(path_dirs: list[Path], *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": os.pathsep.join([*map(str, path_dirs), "/usr/bin", "/bin"])}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run(list(argv), capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


@pytest.mark.slow
@pytest.mark.e2e
def test_our_own_command_reaches_our_cli_with_nemo_gym_first_on_path(tool_env: Path, tmp_path: Path) -> None:
    path = [NEMO_GYM_BIN, tool_env / "bin"]  # NeMo Gym's environment activated, ours installed as a tool
    theirs = run_with(path, "gym", "--help")
    assert "gym orchestration" not in theirs.stdout + theirs.stderr  # their `gym` wins the name...
    ours = run_with(path, "gym-orch", "--version")
    assert ours.returncode == 0 and ours.stdout.startswith("gym orchestration "), ours.stderr  # ...ours is reachable
    config = tmp_path / "eval.yaml"
    config.write_text(
        "services: {policy: {type: vllm, container: c, model: m}}\n"
        "compute: {cluster: {type: slurm, account: a}}\n"
        "driver: {policy_model: policy, benchmarks: {answer-judge: {}}}\n"
        f"job: {{output_path: {tmp_path / 'runs'}}}\n"
        "otel: {enabled: false}\n"
    )
    dry = run_with(path, "gym-orch", "eval", "submit", "-c", str(config), "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert "[dry-run] would submit 1 job(s) for 1 benchmark(s)" in dry.stdout


@pytest.mark.slow
@pytest.mark.e2e
def test_sharing_one_environment_is_what_breaks_and_why(tool_env: Path) -> None:
    """NeMo Gym's regular `nemo_gym` package shadows our namespace portion in its own environment:
    the reason the README says to install this tool in an environment of its own."""
    python = NEMO_GYM_BIN / "python"
    probe = "import nemo_gym.orchestration as o, sys; sys.stdout.write(getattr(o, '__version__', 'upstream'))"
    shadowed = subprocess.run([str(python), "-c", probe], capture_output=True, text=True)
    assert shadowed.stdout != "0.1.0" or shadowed.returncode != 0
    ours = subprocess.run([str(tool_env / "bin" / "python"), "-c", probe], capture_output=True, text=True)
    assert ours.stdout == __import__("nemo_gym.orchestration").orchestration.__version__
