"""write_remote_files: many small files in one script, a text bound for several paths sent once."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from nemo_gym.orchestration.submission import write_files_script, write_remote_files

RECORD = '{\n  "sweep_id": "s",\n  "runs": ["a", "b"],\n  "note": "it\'s $HOME `x` \\\\ \\u00e9"\n}\n'


def test_a_text_bound_for_many_paths_is_sent_once_and_written_the_same_everywhere(conn, tmp_path) -> None:
    runs = [tmp_path / f"run-{i}" for i in range(50)]
    for run in runs:
        run.mkdir()
    files = {str(run / "gym-job.json"): f'{{"run": "{run.name}"}}\n' for run in runs}
    files.update({str(run / "gym-sweep.json"): RECORD for run in runs})
    write_remote_files(conn, files)
    for path, content in files.items():
        assert Path(path).read_text(encoding="utf-8") == content
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o644
    [script] = conn.scripts
    assert script.count('"sweep_id": "s"') == 1  # not once per run directory
    assert conn.round_trips == 1


def test_a_copy_that_cannot_be_written_fails_the_whole(conn, tmp_path) -> None:
    (tmp_path / "ok").mkdir()
    files = {str(tmp_path / "ok" / "gym-sweep.json"): RECORD, str(tmp_path / "missing" / "gym-sweep.json"): RECORD}
    with pytest.raises(OSError, match="missing"):
        write_remote_files(conn, files)
    assert (tmp_path / "ok" / "gym-sweep.json").read_text() == RECORD


def test_copies_of_a_first_file_that_failed_are_not_written_empty(conn, tmp_path) -> None:
    (tmp_path / "ok").mkdir()
    files = {str(tmp_path / "missing" / "gym-sweep.json"): RECORD, str(tmp_path / "ok" / "gym-sweep.json"): RECORD}
    with pytest.raises(OSError):
        write_remote_files(conn, files)
    assert not (tmp_path / "ok" / "gym-sweep.json").exists()


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (scripts/test installs it)")
def test_the_script_is_shellcheck_clean() -> None:
    script = write_files_script({"/r/a b/gym-sweep.json": RECORD, "/r/c/gym-sweep.json": RECORD, "/r/d.json": "{}"})
    proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout
