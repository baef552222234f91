"""Golden files: every staged file of every scenario, byte for byte.

After an intended change, regenerate them with `scripts/update-goldens` and review the diff.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from render_helpers import GOLDEN_DIR, golden_configs, golden_form, stage, submit_side_scripts

import nemo_gym.orchestration
from nemo_gym.orchestration import contract, shipping
from nemo_gym.orchestration.render import StagedFile

UPDATE = os.environ.get("GYM_UPDATE_GOLDENS") == "1"
SUBMIT_SIDE = "submit-side"  # beside the staged files: the scripts the submitting machine runs
# The golden configs read this with host:; it must never appear in a staged file.
os.environ["GOLDEN_HF_TOKEN"] = "hf_golden_secret_value"


def golden_files(config, staged) -> dict:
    """lib.sh is the same static library in every job: its golden is kept once, for `single`.
    Python helpers are staged as the package's own modules, byte for byte (test_helpers_are_verbatim).
    The submit-side scripts of the run's record go under submit-side/, their payloads named."""
    files = {
        rel: f
        for rel, f in staged.files.items()
        if (config.stem == "single" or not rel.endswith("steps/lib.sh")) and not rel.endswith(".py")
    }
    for name, script in submit_side_scripts(staged).items():
        files[f"{SUBMIT_SIDE}/{name}"] = StagedFile(golden_form(script))
    return files


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
    """Python is staged only as the package's own modules at their own paths under the shipped
    tree, byte for byte (its packages' __init__ files empty), beside the tree's launcher."""
    package = Path(nemo_gym.orchestration.__file__).parent
    for rel, staged_file in stage(config).files.items():
        if not rel.endswith(".py"):
            continue
        tree, _, inside = rel.partition(f"{contract.SHIPPED_DIR}/")
        assert inside, rel
        if inside == shipping.LAUNCHER or inside.endswith("__init__.py"):
            assert inside == shipping.LAUNCHER or staged_file.content == "", rel
            continue
        module = inside.removeprefix("nemo_gym/orchestration/")
        assert staged_file.content == (package / module).read_text(), rel


@pytest.mark.parametrize("config", golden_configs(), ids=lambda p: p.stem)
def test_secrets_never_staged(config) -> None:
    for rel, staged_file in stage(config).files.items():
        assert "hf_golden_secret_value" not in staged_file.content, rel


def _scripts():
    """Every staged script, and every submit-side script as it is sent (payloads and all)."""
    for config in golden_configs():
        staged = stage(config)
        for rel, staged_file in staged.files.items():
            if rel.endswith(".sh"):
                yield pytest.param(staged_file.content, id=f"{config.stem}/{rel}")
        for name, script in submit_side_scripts(staged).items():
            yield pytest.param(script, id=f"{config.stem}/{SUBMIT_SIDE}/{name}")


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
