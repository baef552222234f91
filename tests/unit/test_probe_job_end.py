"""The probe's reading of a job's last job-end event (``gym_job_end_of`` in the rendered probe):
in bash for an events file of usual size, by grep for one past 64 KiB; both give the last one."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from nemo_gym.orchestration import contract

PROBE = Path(__file__).resolve().parents[1] / "golden" / "expected" / "single" / "submit-side" / "probe.sh"


def function(text: str, name: str) -> str:
    start = text.index(f"\n{name}() {{") + 1
    return text[start : text.index("\n}\n", start) + 3]


def job_end_of(events: str, tmp_path: Path) -> str:
    probe = PROBE.read_text()
    slurp = next(line for line in probe.splitlines() if line.startswith("gym_slurp() "))
    path = tmp_path / "events"
    path.write_text(events)
    script = f'{slurp}\n{function(probe, "gym_job_end_of")}\ngym_job_end_of {path}\nprintf "%s" "$gym_end"\n'
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout


END = contract.EVENT_JOB_END
NOISE = "".join(f"17000{i:05d} {contract.EVENT_DRIVER_START} b{i}\n" for i in range(3000))  # ~80 KiB

CASES = [
    (f"1700000000 {END} 0\n", "0"),
    (f"1700000000 {END} 1\n1700000100 {END} 143\n", "143"),
    (f"1700000000 {contract.EVENT_JOB_START}\n", ""),
    (f"1700000000 {END}-like 9\n", ""),
    (NOISE + f"1700000000 {END} 1\n" + NOISE + f"1700000100 {END} 143\n" + NOISE, "143"),
    (NOISE + f"1700000100 {END} 7\n", "7"),
    (NOISE, ""),
]


@pytest.mark.parametrize(("events", "end"), CASES, ids=range(len(CASES)))
def test_the_last_job_end_is_read_whatever_the_file_s_size(events: str, end: str, tmp_path: Path) -> None:
    assert job_end_of(events, tmp_path) == end
