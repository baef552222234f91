"""The submit host's Slurm rules (backends/slurm_host.py), as tables, and the inline program they
travel in run the way the scripts run it."""

from __future__ import annotations

import subprocess

import pytest

from nemo_gym.orchestration import contract, shipping
from nemo_gym.orchestration.backends import slurm_host
from nemo_gym.orchestration.shipping import Program

SCONTROL = "\n".join(
    [
        "JobId=100 JobName=a JobState=RUNNING Partition=p",
        "JobId=101 JobName=b JobState=PENDING",
        "JobId=205 ArrayJobId=200 ArrayTaskId=5 JobState=RUNNING",
        "JobId=200 ArrayJobId=200 ArrayTaskId=6-9,12%4 JobState=PENDING",
        "JobId=300 ArrayJobId=300 ArrayTaskId=1 JobState=RUNNING",
        "JobId=400+0 JobState=RUNNING",
        "not a job line JobId=999",
    ]
)


@pytest.mark.parametrize(
    ("words", "ids"),
    [
        ("100,101,100", ["100", "101"]),
        ("200_5,,x;rm,200_5,1_2_3", ["200_5"]),
        ("", []),
        ("12 3,$(id),007", ["007"]),
    ],
)
def test_only_slurm_s_ids_are_asked_for_each_once(words: str, ids: list[str]) -> None:
    assert slurm_host.wanted_ids(words) == ids


@pytest.mark.parametrize(
    ("wanted", "found"),
    [
        (["100"], {"100": "JobId=100 JobName=a"}),
        (["101", "555"], {"101": "JobId=101 JobName=b"}),
        # A started task is a record of its own; the pending ones share the array's.
        (["200_5", "200_7", "200_12", "200_10"], {"200_5": "JobId=205", "200_7": "JobId=200", "200_12": "JobId=200"}),
        (["205"], {"205": "JobId=205"}),
        # A task of another array, and a job id that is only an array's number.
        (["300_2", "999"], {}),
    ],
)
def test_a_snapshot_keeps_the_records_the_wanted_ids_name(wanted: list[str], found: dict[str, str]) -> None:
    got = {job_id: line for job_id, line in slurm_host.snapshot(SCONTROL, wanted)}
    assert set(got) == set(found)
    for job_id, start in found.items():
        assert got[job_id].startswith(start)


def test_a_huge_pending_range_costs_only_the_wanted_tasks() -> None:
    text = "JobId=7 ArrayJobId=7 ArrayTaskId=0-4000000000 JobState=PENDING"
    assert [job_id for job_id, _ in slurm_host.snapshot(text, ["7_3999999999", "7_1"])] == ["7_1", "7_3999999999"]


LIST = [("r1", "a", "100"), ("r1", "a", "200_3"), ("r2", "b", "200_4"), ("r2", "c", "100"), ("r3", "d", "300")]


def test_the_tasks_of_one_array_are_one_word_and_each_job_is_asked_once() -> None:
    assert slurm_host.cancel_words(LIST) == ["100", "300", "200_[3,4]"]


@pytest.mark.parametrize(
    ("answer", "refused"),
    [
        # Jobs that ended or that Slurm forgot: nothing refused.
        ("scancel: error: Kill job error on job id 300: Invalid job id specified\n", []),
        ("scancel: error: Kill job error on job id 100: Job/step already completing or completed", []),
        # One job refused: every cancel that named it.
        ("scancel: error: Kill job error on job id 100: Access/permission denied", [("r1", "a"), ("r2", "c")]),
        # An array asked as one word: each of its tasks' benchmarks.
        ("scancel: error: Kill job error on job id 200_[3,4]: Access/permission denied", [("r1", "a"), ("r2", "b")]),
        # A failure that names no job, or says nothing: all of them.
        ("scancel: error: slurm_receive_msg: Socket timed out", [("r1", "a"), ("r2", "b"), ("r2", "c"), ("r3", "d")]),
        ("\n  \n", [("r1", "a"), ("r2", "b"), ("r2", "c"), ("r3", "d")]),
    ],
)
def test_whose_cancel_a_failed_scancel_refused(answer: str, refused: list[tuple[str, str]]) -> None:
    assert slurm_host.refused(answer, LIST) == refused


QOS = """QOS=normal(1)
    UsageRaw=0.000000
    GrpTRES=cpu=N(0)
    MaxWallPJ=N
    User Limits
      alice(1000)
        MaxJobsPU=N(2) MaxSubmitPU=8(3)
        MaxTRESPU=cpu=N(0)
      bob(1001)
        MaxJobsPU=N(5) MaxSubmitPU=8(8)
    Account Limits
      acct
        MaxJobsPA=N(2)
QOS=high(2)
    User Limits
      1000
        MaxSubmitPU=2(0)"""


def test_of_the_qos_table_only_this_user_s_entries_and_no_tres_lines() -> None:
    kept = slurm_host.own_qos_lines(QOS, "alice", "1000")
    assert [line.strip() for line in kept] == [
        "QOS=normal(1)",
        "UsageRaw=0.000000",
        "MaxWallPJ=N",
        "User Limits",
        "alice(1000)",
        "MaxJobsPU=N(2) MaxSubmitPU=8(3)",
        "Account Limits",
        "acct",
        "MaxJobsPA=N(2)",
        "QOS=high(2)",
        "User Limits",
        "1000",
        "MaxSubmitPU=2(0)",
    ]


def _run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    program = shipping.inline(Program.SCHEDULER_HOST)
    return subprocess.run(["python3", "-E", "-s", "-c", program, *args], input=stdin, capture_output=True, text=True)


def test_the_inline_program_answers_as_the_scripts_read_it(tmp_path) -> None:
    done = _run("snapshot", "100,200_7,bad", stdin=SCONTROL)
    assert done.stdout.splitlines() == [
        "100,200_7",
        "100\x1f" + SCONTROL.splitlines()[0],
        "200_7\x1f" + SCONTROL.splitlines()[3],
    ]
    listed = tmp_path / "cancel"
    listed.write_text("".join(f"{r}\t{b}\t{j}\n" for r, b, j in LIST))
    assert _run("cancel-words", str(listed)).stdout.split() == ["100", "300", "200_[3,4]"]
    refused = _run(
        "refused", contract.RUN_MARKER, contract.CANCEL_FAILED_MARKER, str(listed), stdin="job id 300: denied"
    )
    assert refused.stdout.splitlines() == [contract.RUN_MARKER + "r3", contract.CANCEL_FAILED_MARKER + "d"]
    bad = _run("nonsense")
    assert bad.returncode == 2 and bad.stderr.startswith("usage: slurm_host.py") and "Traceback" not in bad.stderr
