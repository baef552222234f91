"""The test kit itself: the fake Slurm's commands and formats, and the fake connection's faults."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from fakes import FakeCluster, FakeConnection
from fakes.connection import FaultNotTriggered
from nemo_gym.orchestration import connection as real_connection
from nemo_gym.orchestration.errors import ConnectionLost, UserError

# What the project's scripts rely on in `scontrol show job -o`: key=value words, in Slurm's order.
SCONTROL_LINE = re.compile(
    r"^JobId=(?P<id>\d+) JobName=(?P<name>\S+) UserId=\S+\(\d+\) GroupId=\S+\(\d+\) MCS_label=N/A "
    r"Priority=\d+ Nice=0 Account=\S+ QOS=\S+ JobState=(?P<state>[A-Z_]+) Reason=(?P<reason>\S+) "
    r"Dependency=(?P<dependency>\S+) Requeue=1 Restarts=(?P<restarts>\d+) BatchFlag=1 Reboot=0 "
    r"ExitCode=(?P<exit>\d+:\d+) RunTime=\S+ TimeLimit=(?P<limit>\S+) TimeMin=N/A .* NodeList=(?P<nodes>\S+) .*"
    r"Command=(?P<command>\S+) .* Power=$"
)


@pytest.fixture
def cluster(tmp_path: Path) -> FakeCluster:
    return FakeCluster(tmp_path / "slurm")


@pytest.fixture
def job_script(tmp_path: Path) -> Path:
    """A batch script that would leave a marker if anything ran it."""
    path = tmp_path / "bench" / "job.sh"
    path.parent.mkdir()
    path.write_text(
        "#!/bin/bash\n#SBATCH --job-name=gym-bench\n#SBATCH --time=02:30:00\n"
        f"touch {path.parent}/ran\n#SBATCH --job-name=ignored-after-a-command\n"
    )
    return path


def sh(cluster: FakeCluster, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, env={**os.environ, **cluster.env()})


def scontrol_fields(cluster: FakeCluster, job_id: str) -> dict[str, str]:
    result = cluster.run("scontrol", "show", "job", "-o", job_id)
    assert result.returncode == 0, result.stderr
    match = SCONTROL_LINE.match(result.stdout.rstrip("\n"))
    assert match, result.stdout
    return match.groupdict()


# -- sbatch -------------------------------------------------------------------------------------------


def test_sbatch_counts_ids_up_from_100_and_never_runs_the_script(cluster, job_script):
    first = cluster.run("sbatch", str(job_script))
    second = cluster.run("sbatch", "--parsable", str(job_script))
    assert (first.returncode, first.stdout) == (0, "Submitted batch job 100\n")
    assert (second.returncode, second.stdout) == (0, "101\n")
    assert not (job_script.parent / "ran").exists()
    job = cluster.job("100")
    assert (job["state"], job["reason"], job["name"], job["time_limit"]) == ("PENDING", "None", "gym-bench", "02:30:00")


def test_sbatch_takes_the_command_line_over_the_script_and_the_file_name_without_either(cluster, tmp_path, job_script):
    plain = tmp_path / "plain.sh"
    plain.write_text("#!/bin/bash\ntrue\n")
    cluster.run("sbatch", "-J", "from-argv", "--time=1-0", str(job_script), "a", "b")
    cluster.run("sbatch", str(plain))
    named, unnamed = cluster.job("100"), cluster.job("101")
    assert (named["name"], named["time_limit"], named["args"]) == ("from-argv", "1-00:00:00", ["a", "b"])
    assert (unnamed["name"], unnamed["time_limit"]) == ("plain.sh", "UNLIMITED")


def test_sbatch_dependency_shows_in_scontrol_until_the_job_leaves_pending(cluster, job_script):
    cluster.next_id = 900
    out = cluster.run(
        "sbatch", "--parsable", "--dependency=afternotok:42", "--kill-on-invalid-dep=yes", str(job_script), "42"
    )
    assert out.stdout == "900\n"
    fields = scontrol_fields(cluster, "900")
    assert (fields["reason"], fields["dependency"]) == ("Dependency", "afternotok:42(unfulfilled)")
    cluster.set_state("900", "RUNNING")
    fields = scontrol_fields(cluster, "900")
    assert (fields["reason"], fields["dependency"], fields["nodes"]) == ("None", "(null)", "n1")


def test_a_refused_sbatch_says_why_on_stderr_and_queues_nothing(cluster, job_script, tmp_path):
    other = tmp_path / "other.sh"
    other.write_text("#!/bin/bash\n")
    cluster.refuse("bench/", "Batch job submission failed: Invalid qos specification", times=1)
    refused = cluster.run("sbatch", "--parsable", str(job_script))
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == "sbatch: error: Batch job submission failed: Invalid qos specification\n"
    assert cluster.jobs() == {}
    assert cluster.run("sbatch", "--parsable", str(other)).stdout == "100\n"
    assert cluster.run("sbatch", "--parsable", str(job_script)).stdout == "101\n"  # the one refusal is spent


def test_sbatch_site_noise_comes_before_the_id_and_the_cluster_after_it(cluster, job_script):
    cluster.noise(["note: project quota at 80%"], ["sbatch: INFO: site plugin says hi"])
    cluster.cluster_name = "alpha"
    out = cluster.run("sbatch", "--parsable", str(job_script))
    assert out.stdout == "note: project quota at 80%\n100;alpha\n"
    assert out.stderr == "sbatch: INFO: site plugin says hi\n"


def test_sbatch_of_a_missing_file_fails_like_slurm(cluster):
    out = cluster.run("sbatch", "--parsable", "nowhere.sh")
    assert (out.returncode, out.stderr) == (1, "sbatch: error: Unable to open file nowhere.sh\n")


# -- scontrol -----------------------------------------------------------------------------------------


def test_scontrol_line_carries_what_set_state_says(cluster, job_script):
    cluster.run("sbatch", str(job_script))
    cluster.set_state("100", "TIMEOUT", restarts=2, time_limit="45")
    fields = scontrol_fields(cluster, "100")
    assert fields["state"] == "TIMEOUT" and fields["reason"] == "TimeLimit"
    assert (fields["restarts"], fields["exit"], fields["limit"]) == ("2", "0:0", "00:45:00")
    assert fields["command"] == str(job_script)
    cluster.set_state("100", "FAILED")
    failed = scontrol_fields(cluster, "100")
    assert (failed["exit"], failed["reason"]) == ("1:0", "NonZeroExitCode")


def test_the_project_patterns_match_the_one_line_record(cluster):
    job_id = cluster.add_job("gym-x", "RUNNING")
    cluster.set_state(job_id, "COMPLETING", reason="TimeLimit")
    script = f'line=$(scontrol show job -o {job_id}); case "$line" in *" Reason=TimeLimit "*) echo walltime ;; esac'
    assert sh(cluster, script).stdout == "walltime\n"
    grep = sh(cluster, f"scontrol show job -o {job_id} | grep -o 'JobState=[A-Z_]*'")
    assert grep.stdout == "JobState=COMPLETING\n"


def test_scontrol_multi_line_form_holds_the_same_fields(cluster):
    job_id = cluster.add_job("gym-x")
    multi = cluster.run("scontrol", "show", "job", job_id).stdout
    one = cluster.run("scontrol", "show", "job", "-o", job_id).stdout
    assert multi.startswith(f"JobId={job_id} JobName=gym-x\n   UserId=") and multi.endswith("\n\n")
    assert multi.split() == one.split()


def test_forgotten_and_unknown_jobs_are_invalid_to_scontrol(cluster):
    job_id = cluster.add_job("done", "COMPLETED")
    cluster.forget(job_id)
    for asked in (job_id, "555"):
        out = cluster.run("scontrol", "show", "job", "-o", asked)
        assert (out.returncode, out.stdout, out.stderr) == (1, "", "slurm_load_jobs error: Invalid job id specified\n")


def test_only_ended_jobs_can_be_forgotten(cluster):
    with pytest.raises(ValueError, match="only forgets jobs that ended"):
        cluster.forget(cluster.add_job("busy", "RUNNING"))


def test_scontrol_expands_hostnames(cluster):
    assert cluster.run("scontrol", "show", "hostnames", "n[1-2,09],gpu").stdout == "n1\nn2\nn09\ngpu\n"


# -- sacct --------------------------------------------------------------------------------------------


def test_sacct_without_accounting_fails_as_slurm_does(cluster):
    job_id = cluster.add_job("x", "COMPLETED")
    out = cluster.run("sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,ExitCode")
    assert (out.returncode, out.stdout, out.stderr) == (1, "", "Slurm accounting storage is disabled\n")


def test_sacct_with_accounting_remembers_forgotten_jobs(cluster):
    cluster.accounting = True
    job_id = cluster.add_job("x", "RUNNING")
    cluster.set_state(job_id, "FAILED", exit_code="2:0")
    cluster.forget(job_id)
    out = cluster.run("sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,ExitCode")
    assert (out.returncode, out.stdout) == (0, "FAILED|2:0\n")
    assert cluster.run("sacct", "-XnP", f"-j{job_id}", "-oState").stdout == "FAILED\n"
    assert cluster.run("sacct", "-X", "-n", "-P", "-j", "777", "-o", "State").stdout == ""


def test_sacct_says_who_cancelled_and_cuts_long_values_in_columns(cluster):
    cluster.accounting = True
    job_id = cluster.add_job("x", "RUNNING")
    cluster.run("scancel", job_id)
    parsable = cluster.run("sacct", "-X", "-n", "-P", "-j", job_id, "-o", "State,ExitCode").stdout
    assert parsable == f"CANCELLED by {os.getuid()}|0:15\n"
    columns = cluster.run("sacct", "-X", "-j", job_id, "-o", "JobID,State").stdout.splitlines()
    assert columns == ["JobID             State ", "------------ ---------- ", f"{job_id:<12} CANCELLED+ "]


def test_sacct_with_slurmdbd_down(cluster):
    cluster.accounting = True
    cluster.slurmdbd_down = True
    out = cluster.run("sacct", "-X", "-n", "-P", "-j", "1", "-o", "State")
    assert (out.returncode, out.stderr) == (1, "sacct: error: Problem talking to the database: Connection refused\n")


# -- scancel ------------------------------------------------------------------------------------------


def test_scancel_cancels_queued_and_running_jobs(cluster):
    queued, running = cluster.add_job("q"), cluster.add_job("r", "RUNNING")
    out = cluster.run("scancel", queued, running)
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")
    assert [(cluster.job(i)["state"], cluster.job(i)["exit_code"]) for i in (queued, running)] == [
        ("CANCELLED", "0:0"),
        ("CANCELLED", "0:15"),
    ]
    assert cluster.cancelled_ids() == [queued, running]


def test_scancel_leaves_ended_jobs_and_is_silent_about_gone_ones(cluster):
    done = cluster.add_job("d", "COMPLETED")
    out = cluster.run("scancel", done, "4242")
    assert (out.returncode, out.stderr) == (0, "")
    assert cluster.job(done)["state"] == "COMPLETED"
    verbose = cluster.run("scancel", "-v", done, "4242")
    assert verbose.returncode == 0
    assert f"Kill job error on job id {done}: Job/step already completing or completed" in verbose.stderr
    assert "Kill job error on job id 4242: Invalid job id specified" in verbose.stderr


def test_strict_scancel_fails_for_ended_and_unknown_jobs(cluster):
    cluster.strict_scancel = True
    done = cluster.add_job("d", "COMPLETED")
    ended = cluster.run("scancel", done)
    unknown = cluster.run("scancel", "4242")
    assert (ended.returncode, ended.stderr) == (
        1,
        f"scancel: error: Kill job error on job id {done}: Job/step already completing or completed\n",
    )
    assert (unknown.returncode, unknown.stderr) == (
        1,
        "scancel: error: Kill job error on job id 4242: Invalid job id specified\n",
    )
    assert cluster.job(done)["state"] == "COMPLETED"


def test_scancel_with_a_signal_leaves_the_job_running(cluster):
    job_id = cluster.add_job("r", "RUNNING")
    assert cluster.run("scancel", "--signal=USR1", "-b", job_id).returncode == 0
    assert cluster.job(job_id)["state"] == "RUNNING"
    assert cluster.calls("scancel") == [["--signal=USR1", "-b", job_id]]


# -- squeue, call log, PATH -----------------------------------------------------------------------------


def test_squeue_shows_queued_jobs_only(cluster):
    running, done = cluster.add_job("r", "RUNNING"), cluster.add_job("d", "COMPLETED")
    assert cluster.run("squeue", "-h", "-j", running, "-o", "%T").stdout == "RUNNING\n"
    assert cluster.run("squeue", "-h", "-j", done, "-o", "%T").stdout == ""
    missing = cluster.run("squeue", "-h", "-j", "999", "-o", "%T")
    assert (missing.returncode, missing.stderr) == (1, "slurm_load_jobs error: Invalid job id specified\n")


def test_every_call_is_logged_in_order(cluster):
    cluster.run("squeue", "-h")
    cluster.run("scancel", "7")
    assert cluster.calls() == [["squeue", "-h"], ["scancel", "7"]]
    assert cluster.calls("scancel") == [["7"]]


def test_a_real_slurm_on_path_is_hidden_and_removed_commands_are_absent(cluster, tmp_path, monkeypatch):
    real_bin = tmp_path / "usr-bin"
    real_bin.mkdir()
    for name in ("sbatch", "sacct", "tool"):
        (real_bin / name).write_text("#!/bin/sh\necho real\n")
        (real_bin / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{real_bin}:{os.environ['PATH']}")
    cluster.remove_commands("sacct")
    out = sh(cluster, "command -v sacct || echo no-sacct; sbatch --wrap true; tool")
    assert out.stdout == "no-sacct\nSubmitted batch job 100\nreal\n"
    cluster.without_slurm()
    assert sh(cluster, "command -v sbatch scontrol squeue scancel sacct; echo $?").stdout == "1\n"


# -- the connection ---------------------------------------------------------------------------------------


@pytest.fixture
def conn(cluster: FakeCluster) -> FakeConnection:
    return FakeConnection(cluster)


def test_run_script_runs_bash_with_the_cluster_and_counts(conn, job_script):
    with conn as c:
        result = c.run_script(f"sbatch --parsable {job_script}; echo err >&2; exit 3\n")
    assert (result.returncode, result.stdout, result.stderr) == (3, "100\n", "err\n")
    assert isinstance(result, real_connection.Result)
    assert (conn.round_trips, conn.scripts) == (1, [f"sbatch --parsable {job_script}; echo err >&2; exit 3\n"])


def test_lose_before_runs_nothing_and_later_calls_work(conn, tmp_path):
    marker = tmp_path / "ran"
    conn.lose_before(2)
    assert conn.run_script("true").returncode == 0
    with pytest.raises(ConnectionLost):
        conn.run_script(f"touch {marker}")
    assert not marker.exists()
    assert conn.run_script("echo back").stdout == "back\n"
    assert len(conn.scripts) == 3


def test_lose_after_runs_the_script_but_loses_its_output(conn, cluster, job_script):
    conn.lose_after(1)
    with pytest.raises(ConnectionLost, match="failed"):
        conn.run_script(f"sbatch --parsable {job_script}")
    assert list(cluster.jobs()) == ["100"]


SUBMISSION = """\
for b in first second; do
  out=$(sbatch --parsable {script} 2>&1); rc=$?
  printf '__GYM_JOB:%s:%s:%s\\n' "$b" "$rc" "$out"
done
"""


def test_lose_during_stops_a_submission_right_after_its_first_sbatch(conn, cluster, job_script):
    conn.lose_during(1, after_output="__GYM_JOB:first:")
    with pytest.raises(ConnectionLost):
        conn.run_script(SUBMISSION.format(script=job_script))
    assert list(cluster.jobs()) == ["100"]
    assert len(cluster.calls("sbatch")) == 1


def test_lose_during_reaches_into_functions_and_command_substitutions(conn, cluster, job_script):
    conn.lose_during(1, after_output="half")
    script = f"f() {{ echo half; x=$(sbatch {job_script}); }}\nf\n"
    with pytest.raises(ConnectionLost):
        conn.run_script(script)
    assert cluster.calls("sbatch") == []


def test_lose_during_whose_text_never_comes_fails_the_test(conn):
    conn.lose_during(1, after_output="never printed")
    with pytest.raises(FaultNotTriggered, match="never printed"):
        conn.run_script("echo something else")


def test_a_fault_for_a_script_already_run_is_a_mistake(conn):
    conn.run_script("true")
    with pytest.raises(ValueError, match="given already"):
        conn.lose_after(1)


def test_refused_connect_is_a_user_error_not_a_lost_connection_at_the_first_script(conn):
    conn.refuse_connect()
    # ssh's master connects with the first command
    with conn.connect("login2") as refused, pytest.raises(UserError) as raised:
        refused.run_script("touch never")
    assert not isinstance(raised.value, ConnectionLost)
    assert "cannot connect to login2" in str(raised.value)
    assert conn.scripts == [] and refused.round_trips == 0


def test_a_connection_already_open_is_not_refused_later(conn):
    conn.run_script("true")
    conn.refuse_connect()
    assert conn.run_script("echo still").stdout == "still\n"
    with pytest.raises(UserError, match="cannot connect"), conn.connect("login.fake") as sibling:
        sibling.stream_script("true")


def test_siblings_share_the_cluster_and_number_scripts_together(conn, cluster, monkeypatch):
    conn.patch_connect(monkeypatch)
    conn.lose_before(2)
    with real_connection.connect("login.fake") as first:
        first.run_script("sbatch --wrap true")
    with real_connection.connect("login.fake") as second, pytest.raises(ConnectionLost):
        second.run_script("sbatch --wrap true")
    assert isinstance(first, FakeConnection) and first is not conn
    assert list(cluster.jobs()) == ["100"]
    assert (len(conn.scripts), len(conn.plan.connections)) == (2, 3)


def test_stream_script_streams_and_a_lost_stream_ends_with_255(conn):
    plain = conn.stream_script("echo one; echo two")
    assert (plain.communicate()[0], plain.returncode) == ("one\ntwo\n", 0)
    conn.lose_during(2, after_output="two")
    cut = conn.stream_script("echo one; echo two; sleep 5; echo three")
    assert (cut.communicate(timeout=10)[0], cut.returncode) == ("one\ntwo\n", 255)
    conn.lose_before(3)
    gone = conn.stream_script("echo never")
    assert (gone.communicate(timeout=10)[0], gone.returncode) == ("", 255)
