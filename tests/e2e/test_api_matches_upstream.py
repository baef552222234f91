"""Our `nemo_gym.orchestration.api` against the installed NeMo Gym 0.7.0's, class by class and
field by field (names, types, defaults): every class and field of 0.7.0 is here, the same.

Each side is read by its own interpreter (tests/e2e/api_fields.py): 0.7.0's lives in the driver's
environment built by scripts/setup-envs, where its `nemo_gym` package shadows ours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ENVS = Path(os.environ.get("GYM_ENVS_DIR", Path.home() / ".cache" / "gym-orchestration" / "envs"))
# Where we are a superset on purpose, each named in the README ("Extensions beyond the spec").
# This machine (local) and Kubernetes beside 0.7.0's Slurm.
EXTENSIONS = {
    ("SubmitConfig", "compute"): "dict[str, KubernetesComputeConfig | LocalComputeConfig | SlurmComputeConfig]"
}


def fields_of(python: Path | str) -> dict:
    proc = subprocess.run([str(python), str(HERE / "api_fields.py")], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def theirs() -> dict:
    python = ENVS / "gym" / "bin" / "python"
    if not python.exists():
        if os.environ.get("GYM_REQUIRE_CLUSTER") == "1":
            pytest.fail(f"NeMo Gym 0.7.0's environment is missing ({python}); scripts/setup-envs builds it")
        pytest.skip("no NeMo Gym 0.7.0 environment (scripts/setup-envs)")
    return fields_of(python)


@pytest.mark.slow
@pytest.mark.e2e
def test_every_class_and_field_of_0_7_0_is_here_with_its_type_and_default(theirs) -> None:
    ours = fields_of(sys.executable)
    assert theirs["functions"] == ours["functions"] == ["effective_ray_serve", "resolve_env_dict"]
    compared = 0
    for cls, fields in theirs["models"].items():
        assert cls in ours["models"], f"class {cls} of 0.7.0 is missing"
        for name, spec in fields.items():
            compared += 1
            mine = ours["models"][cls].get(name)
            assert mine is not None, f"{cls}.{name} of 0.7.0 is missing"
            if (cls, name) in EXTENSIONS:
                assert mine == {**spec, "type": EXTENSIONS[(cls, name)]}, (cls, name, mine)
                assert spec["type"] == "dict[str, SlurmComputeConfig]"  # ours adds members to 0.7.0's union
                continue
            assert mine == spec, f"{cls}.{name}: 0.7.0 has {spec}, we have {mine}"
    assert compared >= 142  # what 0.7.0 has: a silently empty comparison would pass
