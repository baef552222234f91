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
