"""Nothing read back can make a verb wait for ever (issue 38): a FIFO, or a link to /dev/zero, where
a run's rollouts, its provenance or a gate policy should be is refused (or skipped), never read."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from test_compare import generated_run

from nemo_gym.orchestration import contract, samples
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.untrusted import Unreadable, open_regular


@pytest.fixture(autouse=True)
def deadline():
    """A read that would hang fails the test instead (a FIFO without a writer blocks for ever)."""

    def expired(*_: object) -> None:
        raise TimeoutError("a read did not end")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def hostile(path: Path, kind: str) -> None:
    path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


@pytest.mark.parametrize(("kind", "said"), [("fifo", "a FIFO"), ("zero", "a character device")])
def test_only_regular_files_are_opened(tmp_path, kind: str, said: str) -> None:
    path = tmp_path / "x"
    hostile(path, kind)
    with pytest.raises(Unreadable, match=f"not a regular file \\({said}\\)"):
        open_regular(str(path), "x")
    regular = tmp_path / "y"
    regular.write_bytes(b"ok")
    with open_regular(str(regular), "y") as fh:
        assert fh.read() == b"ok"


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_the_samples_page_of_a_hostile_rollouts_file_is_refused(tmp_path, kind: str) -> None:
    rollouts = tmp_path / "rollouts.jsonl"
    hostile(rollouts, kind)
    with pytest.raises(Unreadable):
        samples.page_of_file(str(rollouts))
    assert samples.main(["page", str(rollouts), "0", "50", "", ""]) == 1  # on a run's host: one JSON error


@pytest.mark.parametrize("kind", ["fifo", "zero"])
def test_results_and_info_skip_a_hostile_provenance_or_rollouts_file(tmp_path, capsys, kind: str) -> None:
    run = generated_run(tmp_path, "run", {"math": {t: [1.0] for t in range(12)}})
    job = run / "math"
    (job / ".gym").mkdir(exist_ok=True)
    hostile(job / contract.PROVENANCE_FILE, kind)
    for verb in ("results", "info"):
        main(["eval", verb, str(run)])
        out, err = capsys.readouterr()
        assert "Traceback" not in err and "internal error" not in err
    hostile(job / contract.ROLLOUTS_FILE, kind)
    assert main(["eval", "results", str(run)]) == 1  # no rollouts to read: not complete, said, never hung
    assert "internal error" not in capsys.readouterr().err
