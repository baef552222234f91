"""A credential written as ``lit:`` (the spec's literal, which NeMo Gym 0.7.0 accepts) is accepted
again, with one warning that says how to use ``host:`` instead; its value travels to the jobs as a
``host:`` value does (in the submission's environment) and is in no file of the run directory or
the index, and in no line printed (issue 38)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
import yaml

from nemo_gym.orchestration import library
from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.exporters import spec

SENTINEL = "lit-SENTINEL-7e1d2c"
HOST = "login.fake"


def with_literal(base: dict, tmp_path: Path, var: str, where: str = "driver") -> dict:
    base["compute"]["cluster"]["hostname"] = HOST
    base["job"]["output_path"] = str(tmp_path / "runs")
    owner = base["driver"] if where == "driver" else base["services"]["policy"]
    owner.setdefault("env", {})[var] = f"lit:{SENTINEL}"
    return base


def files_holding(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


@pytest.mark.parametrize("where", ["driver", "policy"])
@pytest.mark.parametrize("var", spec.SECRETS)
def test_accepted_with_one_warning_that_never_shows_the_value(base, tmp_path, var: str, where: str) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = SubmitConfig.model_validate(with_literal(base, tmp_path, var, where))
    said = [str(w.message) for w in caught if var in str(w.message)]
    assert len(said) == 1 and f"prefer host:{var}" in said[0] and SENTINEL not in said[0]
    owner = config.driver if where == "driver" else config.services["policy"]
    assert owner.env[var] == SENTINEL  # the value the job gets


@pytest.mark.parametrize("mode", ["--resolve-only", "--dry-run"])
def test_resolve_only_and_dry_run_warn_once_and_print_no_value(base, tmp_path, capsys, mode: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(with_literal(base, tmp_path, "WANDB_API_KEY"), sort_keys=False))
    code = main(["eval", "submit", "-c", str(path), mode])
    out, err = capsys.readouterr()
    assert code == 0, err
    warned = [line for line in err.splitlines() if "WANDB_API_KEY" in line]
    assert len(warned) == 1 and warned[0].startswith("warning: ")
    assert SENTINEL not in out and SENTINEL not in err
    if mode == "--resolve-only":
        assert yaml.safe_load(out)["driver"]["env"]["WANDB_API_KEY"] == "host:WANDB_API_KEY"


def test_submitted_the_value_reaches_the_job_and_no_file(base, tmp_path, conn, cluster) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        config = SubmitConfig.model_validate(with_literal(base, tmp_path, "WANDB_API_KEY"))
    submission = library.submit(library.prepare(config), connect=conn.connect)
    assert submission.interrupted is None and not submission.failed
    [record] = submission.records
    # Written nowhere: not the run directory, not the index (XDG_CACHE_HOME is in tmp_path).
    assert files_holding(tmp_path / "runs", SENTINEL) == []
    assert files_holding(Path(os.environ["XDG_CACHE_HOME"]), SENTINEL) == []
    # A resubmit reads it again from the submitting shell's variable of its own name.
    assert "WANDB_API_KEY" in record.carried_from.values()
    assert SENTINEL not in repr(record)
    # The jobs are given it in their environment, as a host: value is: the submission exports it.
    assert cluster.jobs() and any(f"export GYM_HOST_DRIVER__WANDB_API_KEY={SENTINEL}" in s for s in conn.scripts)
