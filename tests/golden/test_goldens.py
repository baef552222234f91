"""Golden files: every staged file of every scenario, byte for byte.

After an intended change, regenerate them with `scripts/update-goldens` and review the diff.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from render_helpers import GOLDEN_DIR, golden_configs, stage

import nemo_gym.orchestration
from nemo_gym.orchestration import exporters

UPDATE = os.environ.get("GYM_UPDATE_GOLDENS") == "1"
# The golden configs read this with host:; it must never appear in a staged file.
os.environ["GOLDEN_HF_TOKEN"] = "hf_golden_secret_value"


def golden_files(config, staged) -> dict:
    """lib.sh is the same static library in every job: its golden is kept once, for `single`.
    Python helpers are staged as the package's own modules, byte for byte (test_helpers_are_verbatim)."""
    return {
        rel: f
        for rel, f in staged.files.items()
        if (config.stem == "single" or not rel.endswith("steps/lib.sh")) and not rel.endswith(".py")
    }


@pytest.mark.parametrize("config", golden_configs(), ids=lambda p: p.stem)
def test_staged_files_match_goldens(config) -> None:
    staged_files = golden_files(config, stage(config))
    expected_dir = GOLDEN_DIR / "expected" / config.stem
    if UPDATE:
        shutil.rmtree(expected_dir, ignore_errors=True)
        for rel, staged_file in staged_files.items():
            path = expected_dir / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(staged_file.content)
    expected = {str(p.relative_to(expected_dir)) for p in expected_dir.rglob("*") if p.is_file()}
    assert expected == set(staged_files), "files differ; run scripts/update-goldens if intended"
    for rel, staged_file in staged_files.items():
        golden = (expected_dir / rel).read_text()
        assert staged_file.content == golden, f"{config.stem}/{rel} differs; run scripts/update-goldens if intended"


@pytest.mark.parametrize("config", golden_configs(), ids=lambda p: p.stem)
def test_helpers_are_verbatim(config) -> None:
    package = Path(nemo_gym.orchestration.__file__).parent
    for rel, staged_file in stage(config).files.items():
        if rel.endswith(".py"):
            name = Path(rel).name
            staged_exporter = "/exporters/" in rel and name[: -len(".py")] not in exporters.SHARED_MODULES
            candidates = [package / "exporters" / name] if staged_exporter else [package / name, package / "gateway" / name]
            source = next(path for path in candidates if path.exists())
            assert staged_file.content == source.read_text(), rel


@pytest.mark.parametrize("config", golden_configs(), ids=lambda p: p.stem)
def test_secrets_never_staged(config) -> None:
    for rel, staged_file in stage(config).files.items():
        assert "hf_golden_secret_value" not in staged_file.content, rel


def _scripts():
    for config in golden_configs():
        for rel, staged_file in stage(config).files.items():
            if rel.endswith(".sh"):
                yield pytest.param(staged_file.content, id=f"{config.stem}/{rel}")


@pytest.mark.parametrize("script", list(_scripts()))
def test_bash_parses(script) -> None:
    proc = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (scripts/test installs it)")
@pytest.mark.parametrize("script", list(_scripts()))
def test_shellcheck_clean(script) -> None:
    proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


@pytest.mark.parametrize("config", golden_configs(), ids=lambda p: p.stem)
def test_the_resolved_config_submits_again_to_the_same_jobs(config, tmp_path) -> None:
    """--resolve-only's output (the staged resolved-config.yaml) validates again to the same files."""
    first = stage(config)
    again = tmp_path / "resolved.yaml"
    again.write_text(first.files["resolved-config.yaml"].content)
    second = stage(again)
    assert set(second.files) == set(first.files)
    for rel, staged_file in first.files.items():
        assert second.files[rel].content == staged_file.content, rel
