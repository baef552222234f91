"""A lane's job queuing the next of its lane (``lane_feed``): which job it queues (table tests over
job directories), what it writes to the next job's chain, its retries; and the tree a submission
stages, run as the job script runs it, with a stand-in ``sbatch`` (no Slurm in the fast tier)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nemo_gym.orchestration import contract, shipping
from nemo_gym.orchestration import lane_feed as lf
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.chain import chain_record, parse_chain
from nemo_gym.orchestration.render import lane_feeder_files


def lane(tmp_path: Path, *kinds: str) -> list[Path]:
    """Jobs 0..n of one lane, each pointing at the next; ``kinds[i]`` of job i+1: "" (waiting),
    "cancelled", "fed", "unfed", "scriptless"."""
    jobs = [tmp_path / f"job{i}" for i in range(len(kinds) + 1)]
    for i, job in enumerate(jobs):
        (job / contract.MARKERS_DIR).mkdir(parents=True)
        kind = kinds[i - 1] if i else ""
        if kind != "scriptless":
            (job / contract.JOB_SCRIPT).write_text("#!/bin/bash\n")
        if kind == "cancelled":
            (job / contract.CHAIN_CANCELLED_FILE).write_text("1700000000\n")
        if kind in ("fed", "unfed"):
            record = (
                chain_record(contract.RECORD_FED, "77", "5", 1)
                if kind == "fed"
                else chain_record(contract.RECORD_UNFED, "5", "no")
            )
            (job / contract.CHAIN_FILE).write_text(record)
        if i + 1 < len(jobs):
            (job / contract.LANE_NEXT_FILE).write_text(f"{jobs[i + 1]}\n/feeder\n")
    return jobs


CHOICES = [
    ((), None, 0, "this job is the last of its lane"),
    (("",), 1, 0, ""),
    (("cancelled", ""), 2, 1, ""),
    (("cancelled", "cancelled", ""), 3, 2, ""),
    (("cancelled",), None, 1, "this job is the last of its lane"),
    (("fed",), None, 0, "was queued already"),
    (("unfed",), None, 0, "was queued already"),
    (("cancelled", "fed"), None, 1, "was queued already"),
    (("scriptless",), None, 0, "holds no job script"),
]


@pytest.mark.parametrize(("kinds", "chosen", "passed", "why"), CHOICES)
def test_the_next_job_is_the_first_not_cancelled_and_never_one_already_queued(
    tmp_path, kinds, chosen, passed, why
) -> None:
    jobs = lane(tmp_path, *kinds)
    choice = lf.choose_next(str(jobs[0]))
    assert choice.next_dir == (None if chosen is None else str(jobs[chosen]))
    assert choice.passed_over == [str(j) for j in jobs[1 : 1 + passed]]
    assert why in choice.why_none and bool(choice.why_none) == (chosen is None)


def test_a_pointer_that_is_no_absolute_path_points_nowhere(tmp_path) -> None:
    jobs = lane(tmp_path, "")
    (jobs[0] / contract.LANE_NEXT_FILE).write_text("job1\n/feeder\n")
    assert lf.choose_next(str(jobs[0])).next_dir is None


def test_a_loop_of_cancelled_jobs_ends(tmp_path) -> None:
    jobs = lane(tmp_path, "cancelled", "cancelled")
    (jobs[2] / contract.LANE_NEXT_FILE).write_text(f"{jobs[1]}\n/feeder\n")  # 1 -> 2 -> 1 -> ...
    choice = lf.choose_next(str(jobs[0]))
    assert choice.next_dir is None and len(choice.passed_over) == lf.MAX_HOPS
    assert "cancelled jobs in a row" in choice.why_none


class Queue:
    def __init__(self, *answers: tuple[str | None, str]) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, str]] = []

    def __call__(self, script: str, me: str) -> tuple[str | None, str]:
        self.asked.append((script, me))
        return self.answers.pop(0)


def fed(jobs: list[Path], queue: Queue, said: list[str], slept: list[float]) -> str | None:
    return lf.feed(str(jobs[0]), "500", queue, said.append, sleep=slept.append, now=lambda: 1700000000)


def test_a_queued_next_is_recorded_fed_with_its_id_and_who_fed_it(tmp_path) -> None:
    jobs, said, slept = lane(tmp_path, "cancelled", ""), [], []
    queue = Queue(("612", "612"))
    assert fed(jobs, queue, said, slept) == "612"
    assert queue.asked == [(str(jobs[2] / contract.JOB_SCRIPT), "500")]
    chain = parse_chain((jobs[2] / contract.CHAIN_FILE).read_text())
    assert (chain.fed_as, chain.unfed, slept) == ("612", None, [])
    assert said == [
        f"the next job of this lane ({jobs[1]}) was cancelled: passing it over",
        f"queued job 612, the next of this job's lane ({jobs[2]})",
    ]


def test_a_refused_next_is_tried_three_times_then_recorded_unfed_with_what_was_said(tmp_path) -> None:
    jobs, said, slept = lane(tmp_path, ""), [], []
    queue = Queue(*[(None, "sbatch: error: QOSMaxSubmitJobPerUserLimit")] * 3)
    assert fed(jobs, queue, said, slept) is None
    assert len(queue.asked) == 3 and slept == [lf.RETRY_SECONDS] * 2
    chain = parse_chain((jobs[1] / contract.CHAIN_FILE).read_text())
    assert (chain.fed_as, chain.unfed) == (None, "sbatch: error: QOSMaxSubmitJobPerUserLimit")
    assert said[-1].startswith("WARNING: could not queue the next job of this lane")


def test_a_refusal_then_success_is_fed(tmp_path) -> None:
    jobs, said, slept = lane(tmp_path, ""), [], []
    assert fed(jobs, Queue((None, "busy"), ("613", "613")), said, slept) == "613"
    assert parse_chain((jobs[1] / contract.CHAIN_FILE).read_text()).fed_as == "613" and slept == [lf.RETRY_SECONDS]


def test_a_job_queued_already_is_not_queued_again(tmp_path) -> None:
    """Slurm requeued the feeding job, or a resumable job's successor started: the lane was fed."""
    jobs, said, slept = lane(tmp_path, "fed"), [], []
    queue = Queue()
    assert fed(jobs, queue, said, slept) is None and queue.asked == []


def test_the_staged_feeder_runs_as_the_job_runs_it_and_hands_sbatch_no_variable_of_this_job(tmp_path) -> None:
    """The tree a submission stages, started with ``python3 -E -s`` as job.sh starts it; a
    stand-in ``sbatch`` (Slurm's own runs in tests/cluster) prints its id and the variables it saw."""
    feeder = tmp_path / "feeder"
    for rel, staged in lane_feeder_files(backend_named("slurm")).items():
        (feeder / rel).parent.mkdir(parents=True, exist_ok=True)
        (feeder / rel).write_text(staged.content)
    jobs = lane(tmp_path / "lane", "")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text(
        '#!/bin/bash\necho "$PWD|$*|${GYM_JOB_ID-unset}" >"$SBATCH_SAW"\necho "4242;cluster"\n'
    )
    (bin_dir / "sbatch").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "SBATCH_SAW": str(tmp_path / "saw"),
        contract.ENV_JOB_DIR: str(jobs[0]),
        contract.ENV_JOB_ID: "500",
    }
    launcher = feeder / contract.SHIPPED_DIR / "gym_run.py"
    argv = [sys.executable, "-E", "-s", str(launcher), "nemo_gym.orchestration.lane_feed", "--scheduler", "slurm_node"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "queued job 4242, the next of this job's lane" in proc.stdout
    script = jobs[1] / contract.JOB_SCRIPT
    assert (tmp_path / "saw").read_text() == f"{jobs[1]}|--parsable --dependency=afterany:500 {script}|unset\n"
    assert parse_chain((jobs[1] / contract.CHAIN_FILE).read_text()).fed_as == "4242"


# The resubmit script's call (``--fed-by-resubmit``), as its host runs it: the inline program.
RESUBMIT_RECORDS = [
    # (what the job directory is, the exit status, the chain after)
    ("empty", 0, "fed\t4300\tresubmit\t{now}\n"),
    ("waiting", 0, "fed\t4300\tresubmit\t{now}\n"),
    ("with a record", 0, "unfed\t5\tno\nfed\t4300\tresubmit\t{now}\n"),
    ("not a directory", 1, None),
]


@pytest.mark.parametrize(("job_dir", "status", "chain"), RESUBMIT_RECORDS, ids=[r[0] for r in RESUBMIT_RECORDS])
def test_resubmit_records_a_stalled_job_fed_through_the_one_writer(tmp_path, job_dir, status, chain) -> None:
    job = tmp_path / "job"
    if job_dir in ("waiting", "with a record"):
        (job / contract.MARKERS_DIR).mkdir(parents=True)
    if job_dir == "with a record":
        (job / contract.CHAIN_FILE).write_text(chain_record(contract.RECORD_UNFED, "5", "no"))
    if job_dir == "not a directory":
        job.write_text("a file\n")
    program = shipping.inline(shipping.Program.LANE_FEEDER)
    before = int(time.time())
    argv = ["python3", "-E", "-s", "-c", program, "--fed-by-resubmit", str(job), "4300"]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=tmp_path, env={"PATH": os.environ["PATH"]})
    assert proc.returncode == status, proc.stderr
    if chain is None:
        assert job.read_text() == "a file\n" and "cannot write" in proc.stderr and "Traceback" not in proc.stderr
        return
    written = (job / contract.CHAIN_FILE).read_text()
    now = int(written.rstrip("\n").rsplit("\t", 1)[1])
    assert before <= now <= time.time() and written == chain.format(now=now)
    assert parse_chain(written).fed_as == "4300"


def test_the_feeder_without_its_words_prints_its_usage(capsys) -> None:
    assert lf.main(["--fed-by-resubmit", "/nonexistent"]) == 2
    assert "--fed-by-resubmit JOB_DIR JOB_ID" in capsys.readouterr().err
