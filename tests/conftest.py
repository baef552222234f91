from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import settings

REPO = Path(__file__).resolve().parent.parent

# No per-example deadline: a generated case is judged by what it does, never by how long it took on
# a machine that is running a Slurm cluster beside the suite (speed is the benchmarks' business).
settings.register_profile("gym", deadline=None)
settings.load_profile("gym")
EXAMPLES = REPO / "examples"
HALVES = ("cluster", "host")  # scripts/test's two halves of the real tier (--only-half)

_BASE: dict[str, Any] = {
    "services": {
        "policy": {"type": "vllm", "container": "vllm/vllm-openai:v0.11.0", "model": "Qwen/Qwen3-8B"},
    },
    "compute": {"cluster": {"type": "slurm", "account": "acct"}},
    "driver": {"benchmarks": {"answer-judge": {}}},
    "job": {"output_path": "/scratch/runs"},
    "otel": {"enabled": False},
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--only-half",
        choices=HALVES,
        help="run only the tests that use the local Slurm cluster (cluster) or only the others (host): "
        "scripts/test runs the two halves of the real tier at once",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keeps the half ``--only-half`` names. The tests that use the cluster run in one process, in
    order, because they share one cluster that some of them preempt, take down or restart; the
    others (local runs, Ray, the stores, the browser) beside them, in a second process."""
    half = config.getoption("only_half")
    if half is None:
        return
    halves = {id(item): "cluster" if "slurm" in getattr(item, "fixturenames", ()) else "host" for item in items}
    config.hook.pytest_deselected(items=[item for item in items if halves[id(item)] != half])
    items[:] = [item for item in items if halves[id(item)] == half]


@pytest.fixture(autouse=True)
def _no_results_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """Status and results feed the results store by themselves: a test not about the store writes
    to none (tests/store turn it back on, each test its own)."""
    monkeypatch.setenv("GYM_RESULTS_URL", "off")


@pytest.fixture(params=["host", "mawk"])
def each_awk(request, tmp_path_factory, monkeypatch) -> str:
    """Runs the test once with the host's awk (and gawk, which the scripts prefer where there is one)
    and once where every awk a script may pick is mawk, Debian's and Ubuntu's default: the awk
    programs that run on login nodes must mean the same in both."""
    import shutil

    if request.param == "host":
        return "host"
    mawk = shutil.which("mawk")
    if mawk is None:
        pytest.skip("no mawk on this machine")
    bin_dir = tmp_path_factory.mktemp("mawk-only")
    for name in ("awk", "gawk", "mawk"):
        (bin_dir / name).symlink_to(mawk)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return "mawk"


@pytest.fixture
def own_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own local index (XDG_CACHE_HOME in its tmp_path): what it submits, selects and
    exports is its own, whatever else runs on the machine."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def base() -> dict[str, Any]:
    """A minimal valid config as a dict; tests change what they exercise."""
    return copy.deepcopy(_BASE)


@pytest.fixture
def write_config(tmp_path: Path):
    def write(data: Any, name: str = "config.yaml") -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@pytest.fixture(scope="session")
def slurm() -> dict[str, str]:
    """The local Slurm cluster's environment; skips (or fails under scripts/test) when it is down."""
    import os
    import shutil
    import subprocess

    script = REPO / "scripts" / "local-slurm"
    up = subprocess.run([str(script), "status"], capture_output=True).returncode == 0
    if not up or shutil.which("sbatch") is None:
        if os.environ.get("GYM_REQUIRE_CLUSTER") == "1":
            pytest.fail("the local Slurm cluster is not up, but GYM_REQUIRE_CLUSTER=1 (scripts/test starts it)")
        pytest.skip("no local Slurm cluster (start it with scripts/local-slurm up)")
    env = {}
    for line in subprocess.run([str(script), "env"], capture_output=True, text=True).stdout.splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export ") :].split("=", 1)
            env[key] = value.strip("'\"")
    os.environ.update(env)
    return env


@pytest.fixture(scope="session")
def backend_python() -> str:
    """A Python with mlflow and wandb (scripts/envs/mlflow-env.sh), as a node's python3 might have."""
    import mlflow_server

    return mlflow_server.backend_python()


@pytest.fixture(scope="session")
def mlflow_server(backend_python: str, tmp_path_factory):
    """One real ``mlflow server`` on loopback for the whole session (it takes seconds to start)."""
    import mlflow_server as helpers

    yield from helpers.mlflow_server(backend_python, tmp_path_factory)
