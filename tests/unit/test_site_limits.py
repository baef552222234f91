"""The site's limits on what a user may queue (backends/slurm_limits.py), read from slurmctld's own
words, and a submission that cannot fit refused whole before anything is written or queued.

The answers below are ``scontrol show assoc_mgr users=root accounts=... flags=assoc`` of Slurm 22.05
on the local cluster started with ``LOCAL_SLURM_MAX_SUBMIT_JOBS`` (trimmed of TRES lines); the
real-cluster test (tests/cluster/test_site_limits.py) meets the same limit from slurmctld itself.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_gym.orchestration import contract, library
from nemo_gym.orchestration.backends import backend_named
from nemo_gym.orchestration.backends.slurm_limits import (
    ArrayTasks,
    SubmitLimit,
    array_tasks,
    association_limits,
    cluster_name,
    default_qos,
    max_array_size,
    qos_limits,
)
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.render import backend_context, render_template
from nemo_gym.orchestration.submission import marked_sections

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


# scontrol show assoc_mgr users=root qos=capped,normal flags=qos, QOS capped (MaxSubmitJobsPerUser=3,
# GrpSubmitJobs=50): every user who has used it has an entry (users= does not filter them), alice's
# first; two of root's jobs in it; normal without limits, nobody in it.
QOS_ANSWER = """Current Association Manager state

QOS Records

QOS=normal(1)
    UsageRaw=0.000000
    GrpJobs=N(0) GrpJobsAccrue=N(0) GrpSubmitJobs=N(0) GrpWall=N(0.00)
    MaxWallPJ=
    Account Limits
        No Accounts
    User Limits
        No Users
QOS=capped(2)
    UsageRaw=0.000000
    GrpJobs=N(0) GrpJobsAccrue=N(2) GrpSubmitJobs=50(5) GrpWall=N(0.00)
    MaxWallPJ=
    Account Limits
      gym
        MaxJobsPA=N(0) MaxJobsAccruePA=N(0) MaxSubmitJobsPA=N(5)
    User Limits
      alice(1001)
        MaxJobsPU=N(0) MaxJobsAccruePU=N(0) MaxSubmitJobsPU=3(3)
      root(0)
        MaxJobsPU=N(0) MaxJobsAccruePU=N(0) MaxSubmitJobsPU=3(2)
"""
# sacctmgr -nP show qos format=Name,MaxSubmitPU / show assoc where user=root format=Cluster,Account,Partition,QOS,DefaultQOS
QOS_TABLE = "normal|\ncapped|3\n"
QOS_DEFAULTS = "gym-local|acct||capped,normal|\ngym-local|gym||capped,normal|capped\ngym-local|solo||capped|\n"


def test_a_qos_states_the_users_own_limit_with_its_use_and_everyones() -> None:
    assert qos_limits(QOS_ANSWER, QOS_TABLE, "Capped", "root(0)") == [
        SubmitLimit("GrpSubmitJobs", "", False, 50, 5, "capped"),  # named as slurmctld names it
        SubmitLimit("MaxSubmitJobsPU", "", True, 3, 2, "capped"),  # root's, not alice's
    ]
    assert qos_limits(QOS_ANSWER, QOS_TABLE, "capped", "alice(1001)")[-1].used == 3
    by_uid = QOS_ANSWER.replace("      root(0)", "      0")  # a user slurmctld knows no name of
    assert qos_limits(by_uid, QOS_TABLE, "capped", "root(0)")[-1].used == 2
    assert qos_limits(QOS_ANSWER, QOS_TABLE, "normal", "root(0)") == []


def test_a_per_user_limit_stated_for_others_only_is_the_users_with_none_used() -> None:
    assert qos_limits(QOS_ANSWER, "", "capped", "bob(1002)")[-1] == SubmitLimit(
        "MaxSubmitJobsPU", "", True, 3, 0, "capped"
    )
    never_used = QOS_ANSWER[: QOS_ANSWER.index("      alice(1001)")] + "        No Users\n"
    assert qos_limits(never_used, QOS_TABLE, "capped", "root(0)")[-1] == SubmitLimit(
        "MaxSubmitJobsPU", "", True, 3, 0, "capped"
    )
    assert qos_limits("", QOS_TABLE, "CAPPED", "root(0)") == [SubmitLimit("MaxSubmitJobsPU", "", True, 3, 0, "capped")]
    assert qos_limits("", "", "capped", "root(0)") == []


def test_the_qos_a_job_gets_without_asking_is_its_associations_default() -> None:
    assert default_qos(QOS_DEFAULTS, "GYM", cluster="gym-local") == "capped"
    assert default_qos(QOS_DEFAULTS, "acct", cluster="gym-local") == "normal"  # several allowed, none default
    assert default_qos(QOS_DEFAULTS, "solo", cluster="gym-local") == "capped"  # the only one allowed
    assert default_qos(QOS_DEFAULTS, "gym", cluster="elsewhere") is None
    assert default_qos("", "gym") is None  # no accounting database answered: not guessed
    assert default_qos(QOS_DEFAULTS + "other|gym||normal|normal\n", "gym") is None  # which cluster is this?
    assert cluster_name(ON_THE_USER) == "gym-local"


def test_a_partitions_own_association_chooses_its_default_qos() -> None:
    table = "c|gym||normal|normal\nc|gym|gpu|normal,capped|capped\n"
    assert default_qos(table, "gym", "gpu") == "capped" and default_qos(table, "gym", "cpu") == "normal"


@given(st.text(max_size=2000), st.text(max_size=200))
def test_any_qos_answer_parses_without_failing(answer: str, table: str) -> None:
    for limit in qos_limits(answer, table, "capped", "root(0)"):
        assert limit.qos is not None and limit.qos.casefold() == "capped" and limit.room() >= 0
    default_qos(table, "gym")


def test_the_users_limit_is_read_with_what_it_counts_already() -> None:
    assert association_limits(ON_THE_USER, "acct") == [SubmitLimit("MaxSubmitJobs", "acct", True, 3, 3)]
    assert association_limits(ON_THE_USER, "other") == []


def test_an_inherited_limit_is_the_users_and_the_accounts_group_limit_is_shared() -> None:
    limits = association_limits(ON_THE_ACCOUNT, "gym")
    assert limits == [SubmitLimit("MaxSubmitJobs", "gym", True, 2, 1), SubmitLimit("GrpSubmitJobs", "gym", False, 5, 1)]
    assert [limit.room() for limit in limits] == [1, 4]  # one more job fits, two do not


def test_no_limit_or_no_answer_limits_nothing() -> None:
    assert association_limits("", "acct") == []
    assert association_limits(ON_THE_USER.replace("MaxSubmitJobs=3(3)", "MaxSubmitJobs="), "acct") == []


@given(st.text(max_size=2000))
def test_any_answer_parses_without_failing(answer: str) -> None:
    for limit in association_limits(answer, "acct"):
        assert limit.account == "acct" and limit.room() == max(0, limit.limit - limit.used)


@given(st.integers(0, 10**9), st.integers(0, 10**9), st.sampled_from(["acct", "ACCT", "Acct"]))
def test_a_users_limit_is_read_exactly_whatever_the_accounts_case(limit: int, used: int, account: str) -> None:
    answer = ON_THE_USER.replace("MaxSubmitJobs=3(3)", f"MaxSubmitJobs={limit}({used})")
    assert association_limits(answer, account) == [SubmitLimit("MaxSubmitJobs", account, True, limit, used)]


def test_a_partitions_own_association_wins_over_the_users_general_one() -> None:
    general = ON_THE_USER.replace("MaxSubmitJobs=3(3)", "MaxSubmitJobs=50(0)")
    gpu_only = general + (
        "ClusterName=gym-local Account=acct UserName=root(0) Partition=gpu Priority=0 ID=9\n"
        "    GrpSubmitJobs=N(2) GrpWall=N(0.00)\n"
        "    MaxJobs= MaxJobsAccrue= MaxSubmitJobs=2(2) MaxWallPJ=\n"
    )
    assert association_limits(gpu_only, "acct", "gpu") == [SubmitLimit("MaxSubmitJobs", "acct", True, 2, 2)]
    assert association_limits(gpu_only, "acct", "cpu") == [SubmitLimit("MaxSubmitJobs", "acct", True, 50, 0)]


@pytest.mark.parametrize(
    ("spec", "count", "highest"),
    [("0-15", 16, 15), ("1,3,5-7", 5, 7), ("0-99:4%8", 25, 96), ("7", 1, 7), ("0-9%2", 10, 9)],
)
def test_an_array_counts_each_task(spec: str, count: int, highest: int) -> None:
    assert array_tasks(spec) == ArrayTasks(count, highest)


@pytest.mark.parametrize("spec", ["", "a-b", "5-1", "0-9:0", "1,,2"])
def test_what_is_not_an_array_counts_nothing(spec: str) -> None:
    assert array_tasks(spec) is None


def test_max_array_size_is_read_from_the_config() -> None:
    assert max_array_size("MaxArraySize            = 1001\nMaxJobCount = 10000\n") == 1001
    assert max_array_size("") is None


# -- a submission meets the limit (the fake Slurm enforces it as slurmctld does) ----------------------


HOST = "login.fake"


def config_file(base: dict, tmp_path: Path, write_config, *benchmarks: str, **bench: dict) -> Path:
    base["compute"]["cluster"]["hostname"] = HOST
    base["job"]["output_path"] = str(tmp_path / "runs")
    base["driver"]["benchmarks"] = {name: dict(bench.get(name, {})) for name in benchmarks}
    return write_config(base)


def three_checkpoints(path: Path) -> library.Prepared:
    return library.prepare(library.compose(path, ["services.policy.model=/ckpt/a,/ckpt/b,/ckpt/c"], multirun=True))


def test_a_sweep_within_the_limit_is_queued(base, tmp_path, write_config, conn, cluster) -> None:
    cluster.limit_submit_jobs("acct", 6)
    submission = library.submit(
        three_checkpoints(config_file(base, tmp_path, write_config, "a", "b")), connect=conn.connect
    )
    assert [b.job_id for r in submission.records for b in r.benchmarks] == ["100", "101", "102", "103", "104", "105"]


def test_a_resumable_benchmark_counts_its_successor(base, tmp_path, write_config, conn, cluster) -> None:
    cluster.limit_submit_jobs("acct", 2)
    path = config_file(base, tmp_path, write_config, "long", "short", long={"resumable": True})
    with pytest.raises(UserError, match=r"the run needs 3 Slurm job\(s\) queued at once"):
        library.submit(library.prepare(library.compose(path, [])), connect=conn.connect)


def test_a_connection_lost_while_asking_the_limits_submits_nothing(base, tmp_path, write_config, conn, cluster) -> None:
    conn.lose_after(1)
    path = config_file(base, tmp_path, write_config, "a")
    with pytest.raises(
        UserError, match="nothing was submitted: the connection was lost while asking the site's limits"
    ):
        library.submit(library.prepare(library.compose(path, [])), connect=conn.connect)
    assert not cluster.calls("sbatch")


def test_an_array_counts_its_tasks_against_the_limit(base, tmp_path, write_config, conn, cluster) -> None:
    cluster.limit_submit_jobs("acct", 5)
    base["compute"]["cluster"]["extra_args"] = {"array": "0-9%2"}
    path = config_file(base, tmp_path, write_config, "a")
    with pytest.raises(UserError, match=r"the run needs 10 Slurm job\(s\) queued at once"):
        library.submit(library.prepare(library.compose(path, [])), connect=conn.connect)
    assert not cluster.calls("sbatch")


BUSY_QOS = "\n".join(
    [
        "Current Association Manager state",
        "",
        "QOS Records",
        "",
        "QOS=capped(2)",
        "    GrpSubmitJobs=50(40) GrpWall=N(0.00)",
    ]
    + ["    GrpTRES=" + ",".join(f"tres{i}=N(0)" for i in range(20)), "    Account Limits", "        No Accounts"]
    + ["    User Limits"]
    + [
        line
        for n in range(800)  # every user of the QOS has an entry, TRES and all: far past what is read
        for line in (
            f"      user{n}({2000 + n})",
            "        MaxJobsPU=N(0) MaxJobsAccruePU=N(0) MaxSubmitJobsPU=3(3)",
            "        MaxTRESPU=" + ",".join(f"tres{i}=N(0)" for i in range(20)),
        )
    ]
    + ["      TRESuser(77)", "        MaxJobsPU=N(0) MaxJobsAccruePU=N(0) MaxSubmitJobsPU=3(3)"]  # a name, not TRES
    + ["      gymuser(1234)", "        MaxJobsPU=N(0) MaxJobsAccruePU=N(0) MaxSubmitJobsPU=3(1)"]
)


def test_the_limits_script_reads_the_users_own_entry_of_a_busy_qos(tmp_path) -> None:
    """The site-limits script run by bash against a fake scontrol/sacctmgr printing Slurm 22.05's
    text for a QOS 800 other users have used: the answer is bounded, and is this user's."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "busy").write_text(BUSY_QOS + "\n")
    fakes = {
        "id": "case $1 in -un) echo gymuser ;; -u) echo 1234 ;; esac",
        "scontrol": f'printf "%s\\n" "$*" >>{tmp_path}/asked; case "$*" in *flags=qos*) cat {tmp_path}/busy ;; esac',
        "sacctmgr": 'case "$*" in *"show assoc"*) echo "c|gym||capped,normal|capped" ;; *"show qos"*) echo "capped|3" ;; esac',
    }
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    backend = backend_named("slurm")
    request = {"accounts": ["gym"], "arrays": False, "qos": [], "cap": 262144}
    script = render_template("site-limits.sh.j2", **backend_context(backend), request=request)
    out = subprocess.run(
        ["bash", "-c", script], capture_output=True, text=True, env={"PATH": f"{bin_dir}:/usr/bin:/bin"}
    ).stdout
    answers = marked_sections(out, contract.LIMITS_MARKER)
    assert len(BUSY_QOS) > 262144 > len(answers["qos"]) and "(3)" not in answers["qos"].partition("User Limits")[2]
    assert "qos=capped,normal flags=qos" in (tmp_path / "asked").read_text()
    assert default_qos(answers["qos-defaults"], "gym") == "capped"
    assert qos_limits(answers["qos"], answers["qos-table"], "capped", answers["user"].strip()) == [
        SubmitLimit("GrpSubmitJobs", "", False, 50, 40, "capped"),
        SubmitLimit("MaxSubmitJobsPU", "", True, 3, 1, "capped"),
    ]


def test_each_component_of_a_heterogeneous_job_counts_and_a_resumable_job_its_successor() -> None:
    """slurmctld keeps a job record per component (a 3-component job shows MaxSubmitJobs=10(3) on
    the local cluster), and a resumable job queues its successor as it starts."""
    from render_helpers import GOLDEN_DIR, stage

    from nemo_gym.orchestration.submission import queue_demands

    backend = backend_named("slurm")
    [het] = queue_demands([stage(GOLDEN_DIR / "configs" / "heterogeneous.yaml").plan])
    assert het.facts["components"] == "3"
    resumable = queue_demands([stage(GOLDEN_DIR / "configs" / "resumable.yaml").plan])
    assert any(d.facts.get("successor") == "1" for d in resumable)  # its resumable benchmark
    answer = ON_THE_USER.replace("MaxSubmitJobs=3(3)", "MaxSubmitJobs=3(1)")  # room for 2
    accounts = {het.facts.get("account", "")}
    answers = {f"account:{a}": answer.replace("Account=acct", f"Account={a}") for a in accounts}
    [problem] = backend.limits_problems(answers, [het])
    assert "the run needs 3 Slurm job(s) queued at once" in problem
