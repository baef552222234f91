"""The site's limits on what a user may queue (backends/slurm_limits.py), read from slurmctld's own
words, and a submission that cannot fit refused whole before anything is written or queued.

The answers below are ``scontrol show assoc_mgr users=root accounts=... flags=assoc`` of Slurm 22.05
on the local cluster started with ``LOCAL_SLURM_MAX_SUBMIT_JOBS`` (trimmed of TRES lines); the
real-cluster test (tests/cluster/test_site_limits.py) meets the same limit from slurmctld itself.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_gym.orchestration import library
from nemo_gym.orchestration.backends.slurm_limits import SubmitLimit, association_limits, first_exceeded
from nemo_gym.orchestration.errors import UserError

# The limit set on the user (sacctmgr modify user root set MaxSubmitJobs=3), three jobs queued.
ON_THE_USER = """Current Association Manager state

Association Records

ClusterName=gym-local Account=acct UserName= Partition= Priority=0 ID=3
    ParentAccount=root(1) Lft=2 DefAssoc=No
    GrpJobs=N(0) GrpJobsAccrue=N(0)
    GrpSubmitJobs=N(3) GrpWall=N(0.00)
    MaxJobs= MaxJobsAccrue= MaxSubmitJobs= MaxWallPJ=
    MinPrioThresh=
ClusterName=gym-local Account=acct UserName=root(0) Partition= Priority=0 ID=6
    ParentAccount= Lft=3 DefAssoc=No
    GrpJobs=N(0) GrpJobsAccrue=N(0)
    GrpSubmitJobs=N(3) GrpWall=N(0.00)
    MaxJobs= MaxJobsAccrue= MaxSubmitJobs=3(3) MaxWallPJ=
    MinPrioThresh=
"""

# Set on the account (MaxSubmitJobs=2, GrpSubmitJobs=5): the user's record shows the inherited limit.
ON_THE_ACCOUNT = """Current Association Manager state

Association Records

ClusterName=gym-local Account=gym UserName= Partition= Priority=0 ID=4
    ParentAccount=root(1) Lft=6 DefAssoc=No
    GrpSubmitJobs=5(1) GrpWall=N(0.00)
    MaxJobs= MaxJobsAccrue= MaxSubmitJobs=2(1) MaxWallPJ=
ClusterName=gym-local Account=gym UserName=root(0) Partition= Priority=0 ID=7
    ParentAccount= Lft=7 DefAssoc=No
    GrpSubmitJobs=N(1) GrpWall=N(0.00)
    MaxJobs= MaxJobsAccrue= MaxSubmitJobs=2(1) MaxWallPJ=
"""


def test_the_users_limit_is_read_with_what_it_counts_already() -> None:
    assert association_limits(ON_THE_USER, "acct") == [SubmitLimit("MaxSubmitJobs", "acct", True, 3, 3)]
    assert association_limits(ON_THE_USER, "other") == []


def test_an_inherited_limit_is_the_users_and_the_accounts_group_limit_is_shared() -> None:
    limits = association_limits(ON_THE_ACCOUNT, "gym")
    assert limits == [SubmitLimit("GrpSubmitJobs", "gym", False, 5, 1), SubmitLimit("MaxSubmitJobs", "gym", True, 2, 1)]
    assert first_exceeded(limits, 1) is None
    assert first_exceeded(limits, 2) == SubmitLimit("MaxSubmitJobs", "gym", True, 2, 1)


def test_no_limit_or_no_answer_limits_nothing() -> None:
    assert association_limits("", "acct") == []
    assert association_limits(ON_THE_USER.replace("MaxSubmitJobs=3(3)", "MaxSubmitJobs="), "acct") == []
    assert first_exceeded([], 10_000) is None


@given(st.text(max_size=2000))
def test_any_answer_parses_into_limits_that_are_numbers(answer: str) -> None:
    for limit in association_limits(answer, "acct"):
        assert limit.limit >= 0 and limit.used >= 0 and limit.room() >= 0


# -- a submission meets the limit (the fake Slurm enforces it as slurmctld does) ----------------------


HOST = "login.fake"


def config_file(base: dict, tmp_path: Path, write_config, *benchmarks: str, **bench: dict) -> Path:
    base["compute"]["cluster"]["hostname"] = HOST
    base["job"]["output_path"] = str(tmp_path / "runs")
    base["driver"]["benchmarks"] = {name: dict(bench.get(name, {})) for name in benchmarks}
    return write_config(base)


def three_checkpoints(path: Path) -> library.Prepared:
    return library.prepare(library.compose(path, ["services.policy.model=/ckpt/a,/ckpt/b,/ckpt/c"], multirun=True))


def test_a_sweep_beyond_the_users_limit_is_refused_whole_naming_the_limit(
    base, tmp_path, write_config, conn, cluster
) -> None:
    cluster.limit_submit_jobs("acct", 5)
    cluster.add_job("other", "RUNNING", account="acct")  # one of the user's jobs counts already
    prepared = three_checkpoints(config_file(base, tmp_path, write_config, "a", "b"))
    with pytest.raises(UserError) as caught:
        library.submit(prepared, connect=conn.connect)
    [problem] = caught.value.problems
    assert problem.startswith("compute.account acct: the 3 runs need 6 Slurm job(s) queued at once, but the site ")
    assert "lets you queue 4 more (MaxSubmitJobs=5 of your association in account acct, 1 counted already)" in problem
    assert not cluster.calls("sbatch") and not any(Path(run.plan.run_dir).exists() for run in prepared.runs)


def test_a_sweep_within_the_limit_is_queued(base, tmp_path, write_config, conn, cluster) -> None:
    cluster.limit_submit_jobs("acct", 6)
    submission = library.submit(
        three_checkpoints(config_file(base, tmp_path, write_config, "a", "b")), connect=conn.connect
    )
    assert [b.job_id for r in submission.records for b in r.benchmarks] == ["100", "101", "102", "103", "104", "105"]


def test_a_resumable_benchmark_counts_its_successor(base, tmp_path, write_config, conn, cluster) -> None:
    cluster.limit_submit_jobs("acct", 2)
    path = config_file(base, tmp_path, write_config, "long", "short", long={"resumable": True})
    with pytest.raises(UserError, match=r"the run need 3 Slurm job\(s\) queued at once"):
        library.submit(library.prepare(library.compose(path, [])), connect=conn.connect)


def test_a_connection_lost_while_asking_the_limits_submits_nothing(base, tmp_path, write_config, conn, cluster) -> None:
    conn.lose_after(1)
    path = config_file(base, tmp_path, write_config, "a")
    with pytest.raises(UserError, match="lost while asking the site's limits, so nothing was submitted: retry"):
        library.submit(library.prepare(library.compose(path, [])), connect=conn.connect)
    assert not cluster.calls("sbatch")
