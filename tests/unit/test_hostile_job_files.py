"""A job directory's files are data anyone may have written: a state or events file holding bytes
that are not UTF-8, a receipt that is not one, a run directory whose name is not UTF-8 — status
and results read them (shown escaped, or unreadable), never a traceback."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from checkpoint_runs import BENCH, REAL_RUN
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.cli.main import main


def state_dir(run_dir: Path | bytes) -> Path:
    [found] = (Path(os.fsdecode(run_dir)) / BENCH / ".gym").iterdir()
    return found


def gym(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["eval", *args])
    out, err = capsys.readouterr()
    for text in (out, err):
        text.encode("utf-8")  # printable as it is: nothing unencodable reached the terminal
        assert "Traceback" not in text and "internal error" not in text and "\x1b" not in text
    return code, out, err


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    shutil.copytree(REAL_RUN, tmp_path / "run")
    return tmp_path / "run"


def test_a_state_file_that_is_not_utf8_is_shown_escaped(run_dir, capsys) -> None:
    (state_dir(run_dir) / contract.STATE_FILE).write_bytes(b"phase=succeeded\ndetail=done \xff\xfe\x1b[31m\n")
    code, out, _ = gym(capsys, "status", str(run_dir))
    assert code == 0 and "succeeded" in out and "done \\xff\\xfe\\x1b[31m" in out
    code, out, _ = gym(capsys, "status", str(run_dir), "--json")
    assert json.loads(out)["jobs"][0]["detail"] == "done \udcff\udcfe\x1b[31m"


def test_a_phase_that_is_not_utf8_is_no_phase(run_dir, capsys) -> None:
    (state_dir(run_dir) / contract.STATE_FILE).write_bytes(b"phase=succ\xffeeded\n")
    code, out, _ = gym(capsys, "status", str(run_dir))
    assert code == 0 and "succeeded" not in out.split("\n")[2]


def test_an_events_file_that_is_not_utf8_still_reads(run_dir, capsys) -> None:
    with open(state_dir(run_dir) / contract.EVENTS_FILE, "ab") as fh:
        fh.write(b"\xff\xfe job-end \xff\n\x00\x00\n")
    assert gym(capsys, "status", str(run_dir))[0] == 0
    assert gym(capsys, "results", str(run_dir))[0] == 0


def test_a_run_directory_whose_name_is_not_utf8_is_read_and_shown_escaped(run_dir, tmp_path, capsys) -> None:
    odd = os.fsencode(tmp_path) + b"/run-\xff\xfe"
    os.rename(run_dir, odd)
    code, out, _ = gym(capsys, "status", os.fsdecode(odd))
    assert code == 0 and "succeeded" in out
    code, out, _ = gym(capsys, "results", os.fsdecode(odd))
    assert code == 0 and "run-\\xff\\xfe" in out
    code, out, _ = gym(capsys, "results", os.fsdecode(odd), "--json")
    assert json.loads(out)["run_dir"] == os.fsdecode(odd)


@pytest.mark.parametrize(
    "receipt", [b"[1, 2]", b"null", b"\xff", b'{"state": "failed", "detail": "\xff"}', b"[" * 100_000]
)
def test_a_receipt_that_is_not_one_is_ignored(run_dir, capsys, receipt) -> None:
    exports = run_dir / BENCH / contract.EXPORTS_DIR
    exports.mkdir(parents=True)
    (exports / "mlflow.json").write_bytes(receipt)
    code, out, _ = gym(capsys, "status", str(run_dir))
    assert code == 0 and "export" not in out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(state=st.binary(max_size=120), events=st.binary(max_size=120))
def test_any_bytes_in_a_state_or_events_file_read_back(run_dir, capsys, state, events) -> None:
    (state_dir(run_dir) / contract.STATE_FILE).write_bytes(state)
    with open(state_dir(run_dir) / contract.EVENTS_FILE, "ab") as fh:
        fh.write(events)
    for args in (["status", str(run_dir)], ["status", str(run_dir), "--json"], ["results", str(run_dir)]):
        assert gym(capsys, *args)[0] in (0, 1)
