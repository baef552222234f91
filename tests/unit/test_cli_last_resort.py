"""The CLI's promise, whatever breaks: one ``error: internal error (...)`` line, never a traceback,
even when what broke is an import the last-resort handler itself would need (a backend's, the
library's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import nemo_gym.orchestration

SRC = str(Path(nemo_gym.orchestration.__file__).resolve().parents[2])
TOKEN = "hunter2-secret-token"

# Each case: the modules whose import raises ImportError (as a backend's missing dependency would).
BROKEN = {
    "a backend": ["nemo_gym.orchestration.backends"],
    "the library": ["nemo_gym.orchestration.library"],
    "the scrubber too": ["nemo_gym.orchestration.backends", "nemo_gym.orchestration.exporters.record"],
}


@pytest.mark.parametrize("broken", list(BROKEN.values()), ids=list(BROKEN))
def test_an_import_error_in_what_a_verb_imports_is_one_line(broken: list[str], tmp_path: Path) -> None:
    program = (
        "import sys\n"
        "class Broken:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name in {broken!r}:\n"
        "            raise ImportError(f'cannot import name {name!r} (a missing dependency)')\n"
        "sys.meta_path.insert(0, Broken())\n"
        "from nemo_gym.orchestration.cli.main import main\n"
        "sys.exit(main(['eval', 'list']))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "GYM_DEBUG"}
    env |= {"PYTHONPATH": SRC, "XDG_CACHE_HOME": str(tmp_path / "cache"), "MLFLOW_TRACKING_TOKEN": TOKEN}
    done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: internal error (ImportError: ")
    assert lines[0].endswith("; rerun with GYM_DEBUG=1 and report the traceback")
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (
            PermissionError(13, "Permission denied", "/runs/gym-job-x"),
            "cannot use /runs/gym-job-x (Permission denied): check its permissions",
        ),
        (OSError(36, "File name too long", "/x" * 5000), "(File name too long): shorten the path"),
        (
            OSError(28, "No space left on device", "/scratch/r"),
            "cannot use /scratch/r (No space left on device): free some space there",
        ),
    ],
)
def test_an_os_error_is_one_line_naming_the_thing_and_the_fix(error: OSError, said: str, monkeypatch, capsys) -> None:
    """A run directory of mode 000, a name too long, a full disk: never 'internal error'."""
    from nemo_gym.orchestration.cli import main as cli
    from nemo_gym.orchestration.verbs.results import command as results

    def fails(args: object) -> int:
        raise error

    monkeypatch.setattr(results, "run_results", fails)
    assert cli.main(["eval", "results", "anything"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err and "internal error" not in err and len(err) < 400, err
