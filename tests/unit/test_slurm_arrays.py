"""Which jobs of a submission go to Slurm as one job array (backends/slurm_arrays.py): the pure
rules, then the array's script as rendered, checked by bash and shellcheck. The arrays really
running are tests/cluster/test_arrays.py's."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.backends import slurm_arrays
from nemo_gym.orchestration.backends.slurm import SlurmBackend
from nemo_gym.orchestration.backends.slurm_arrays import ARRAYS_FROM, arrays, shape
from nemo_gym.orchestration.plan.model import DriverPlan, JobPlan, ResumePlan

SHAPE = (("account", "acct"), ("partition", "gpu"), ("nodes", "1"), ("gpus-per-node", "4"))


# The rules read a job's directory, options, resume and nothing else: no driver or resume is built.
_NO_DRIVER = DriverPlan.__new__(DriverPlan)
_SOME_RESUME = ResumePlan.__new__(ResumePlan)


def job(i: int, options: tuple = SHAPE) -> JobPlan:
    directives = ((("job-name", f"gym-b{i}"), *options, ("chdir", f"/r/{i}"), ("output", f"/r/{i}/slurm-%j.out")),)
    return JobPlan(
        benchmark=f"b{i}",
        local_job_id="x",
        job_dir=f"/r/{i}",
        directives=directives,
        node_count=1,
        steps=(),
        driver=_NO_DRIVER,
    )


def units(
    jobs: list[JobPlan], secrets: tuple[tuple[str, str], ...] = ()
) -> list[tuple[JobPlan, tuple[tuple[str, str], ...]]]:
    return [(j, secrets) for j in jobs]


def test_jobs_of_one_shape_go_as_one_array_whose_tasks_are_the_jobs_in_order() -> None:
    jobs = [job(i) for i in range(ARRAYS_FROM)]
    [array] = arrays(units(jobs), {}, 1001)
    assert array.job_dirs == tuple(f"/r/{i}" for i in range(ARRAYS_FROM)) and array.home == "/r/0"
    options = dict(array.options)
    # Each task's own script sets its directory and log: the array names and logs only itself.
    assert options["job-name"] == "gym-array" and options["output"] == "/r/0/.gym/array-%A_%a.out"
    assert "chdir" not in options and shape(array.options) == SHAPE


def test_fewer_jobs_of_a_shape_than_arrays_from_are_each_queued_on_their_own() -> None:
    assert arrays(units([job(i) for i in range(ARRAYS_FROM - 1)]), {}, 1001) == []


def test_arrays_are_no_bigger_than_the_site_allows_and_a_lone_remainder_goes_alone() -> None:
    jobs = [job(i) for i in range(9)]
    found = arrays(units(jobs), {}, 4)
    assert [a.job_dirs for a in found] == [("/r/0", "/r/1", "/r/2", "/r/3"), ("/r/4", "/r/5", "/r/6", "/r/7")]
    assert arrays(units(jobs), {}, 1) == []  # MaxArraySize=1: no array can hold two


def test_a_throttle_makes_an_array_of_a_few_jobs_and_caps_its_tasks_at_once() -> None:
    """job.max_concurrent: K: the jobs of one shape go as an array however few, --array=0-N%K."""
    from dataclasses import replace

    throttled = [replace(job(i), max_concurrent=2) for i in range(3)]
    [array] = arrays(units(throttled), {}, 1001)
    assert array.indices == "0-2%2" and array.throttle == 2
    assert arrays(units([job(i) for i in range(ARRAYS_FROM)]), {}, 1001)[0].indices == f"0-{ARRAYS_FROM - 1}"


def test_a_sharded_benchmark_s_shards_are_an_array_of_their_own_however_few() -> None:
    from dataclasses import replace

    from nemo_gym.orchestration.plan.model import ShardPlan

    def shard(i: int, bench: str) -> JobPlan:
        return replace(job(i), shard=ShardPlan(i, 2, bench, "", "", None, (), (), ()))

    found = arrays(units([shard(1, "/r/a"), shard(2, "/r/a"), shard(3, "/r/b"), shard(4, "/r/b"), job(5)]), {}, 1001)
    assert [a.job_dirs for a in found] == [("/r/1", "/r/2"), ("/r/3", "/r/4")]


def test_jobs_slurm_would_treat_apart_never_share_an_array() -> None:
    other = tuple((k, "cpu" if k == "partition" else v) for k, v in SHAPE)
    jobs = [job(i) for i in range(ARRAYS_FROM)] + [job(100 + i, other) for i in range(ARRAYS_FROM)]
    found = arrays(units(jobs), {}, 1001)
    assert [a.home for a in found] == ["/r/0", "/r/100"]
    # Another run's secrets: another array (a task gets its array's environment).
    apart = arrays(units(jobs[:ARRAYS_FROM], (("A", "1"),)) + units(jobs[ARRAYS_FROM:]), {}, 1001)
    assert [a.secrets for a in apart] == [(("A", "1"),), ()]


def test_a_heterogeneous_resumable_fed_or_own_array_job_is_never_a_task() -> None:
    jobs = [job(i) for i in range(ARRAYS_FROM + 4)]
    jobs[0] = replace(jobs[0], directives=(jobs[0].directives[0], SHAPE))  # heterogeneous
    jobs[1] = replace(jobs[1], resume=_SOME_RESUME)
    jobs[2] = replace(jobs[2], directives=((*jobs[2].directives[0], ("array", "0-3")),))
    fed = {jobs[3].job_dir: "run/b0"}
    [array] = arrays(units(jobs), fed, 1001)
    assert array.job_dirs == tuple(j.job_dir for j in jobs[4:])


@given(count=st.integers(0, 60), most=st.integers(0, 20))
def test_every_job_is_in_at_most_one_array_in_order_within_the_size(count: int, most: int) -> None:
    jobs = [job(i) for i in range(count)]
    found = arrays(units(jobs), {}, most)
    tasks = [d for a in found for d in a.job_dirs]
    assert tasks == sorted(set(tasks), key=lambda d: int(d.rsplit("/", 1)[1]))
    assert all(2 <= len(a.job_dirs) <= most for a in found)
    if count >= ARRAYS_FROM and most >= 2:
        assert len(tasks) >= count - 1  # at most a lone remainder goes alone


def array_script() -> str:
    from nemo_gym.orchestration.backends.slurm import _array_to_queue

    [array] = arrays(units([job(i) for i in range(ARRAYS_FROM)]), {}, 1001)
    return _array_to_queue(array, SlurmBackend().template_vars()).script_text + "\n"


# What sbatch may answer an array's submission (site plugins say more before the id; a federated
# cluster adds ";cluster"), and the id the submission reads from it, with its status.
SBATCH_ANSWERS = [
    ("1234\n", 0, "1234", 0),
    ("1234;cluster\n", 0, "1234", 0),
    ("note: job shaped by the site plugin\n1234\n", 0, "1234", 0),
    ("1234\r\n\n", 0, "1234", 0),
    ("Submitted batch job 1234", 0, "1234", 0),
    ("", 0, "", 1),  # no id said: refused, whatever sbatch's status
    ("sbatch: error: Batch job submission failed", 1, "", 1),
    ("12a4\n", 0, "", 1),
]


@pytest.mark.parametrize(("said", "status", "found", "rc"), SBATCH_ANSWERS)
def test_the_array_s_id_is_the_last_word_sbatch_said_digits_only(said, status, found, rc, tmp_path) -> None:
    """The submission's lines for one array, run by bash with a stand-in sbatch."""
    from nemo_gym.orchestration.backends.base import QueueRequest
    from nemo_gym.orchestration.backends.slurm import _array_to_queue
    from nemo_gym.orchestration.templating import _environment

    [array] = arrays(units([job(i) for i in range(ARRAYS_FROM)], (("TOKEN", "s3cret"),)), {}, 1001)
    queued = replace(_array_to_queue(array, SlurmBackend().template_vars()), home=str(tmp_path / "h"))
    queued = replace(queued, manifest=str(tmp_path / "m"), script=str(tmp_path / "a.sh"))
    backend = (
        _environment().get_template("backend-slurm.sh.j2").make_module({"backend_vars": SlurmBackend().template_vars()})
    )
    lines = str(backend.queue_runs(QueueRequest((), (queued,))))
    stand_in = f'sbatch() {{ [ "$TOKEN" = s3cret ] && printf %s {shlex.quote(said)}; return {status}; }}\n'
    script = stand_in + lines + '\nprintf "%s|%s" "$gym_array_id_0" "$gym_array_rc_0"\n'
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert proc.stdout == f"{found}|{rc}", proc.stderr


def test_the_array_script_picks_its_task_s_job_directory_and_is_bash_and_shellcheck_clean(tmp_path) -> None:
    script = array_script()
    assert script.startswith("#!/bin/bash\n#SBATCH --job-name=gym-array\n")
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/test installs it)")
    proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_the_array_script_runs_its_task_s_job_script_with_the_task_s_id(tmp_path) -> None:
    # Run for real, as slurmd would run task 1 (the job scripts stand in for job.sh).
    dirs = [tmp_path / f"job{i}" for i in range(2)]
    for d in dirs:
        d.mkdir()
        (d / "job.sh").write_text('echo "ran in $PWD as $GYM_ARRAY_TASK_JOB_ID"\n')
    manifest = tmp_path / "manifest"
    manifest.write_text("".join(f"{d}\n" for d in dirs))
    script = array_script().replace("/r/0/.gym/array-manifest", str(manifest))
    env = {"PATH": "/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_JOB_ID": "1200"}
    assert subprocess.run(["bash", "-c", script], env=env).returncode == 0
    assert (dirs[1] / "slurm-1200_1.out").read_text() == f"ran in {dirs[1]} as 1200_1\n"
    env["SLURM_ARRAY_TASK_ID"] = "7"  # past the manifest: said, not run
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert proc.returncode == 1 and "no job directory on line 8" in proc.stderr
    assert slurm_arrays.ARRAY_MANIFEST.endswith("array-manifest")


def snapshot_of(tmp_path, scontrol_says: str, ids: str) -> dict[str, str]:
    """What the probe's snapshot (describe_snapshot) keeps of each id, with ``scontrol_says``
    standing in for `scontrol -a show job -o` (and no sacct)."""
    from nemo_gym.orchestration.templating import _environment

    module = (
        _environment().get_template("backend-slurm.sh.j2").make_module({"backend_vars": SlurmBackend().template_vars()})
    )
    (tmp_path / "bin").mkdir()
    (tmp_path / "says").write_text(scontrol_says)
    (tmp_path / "bin" / "scontrol").write_text(f"#!/bin/sh\ncat {tmp_path / 'says'}\n")
    (tmp_path / "bin" / "scontrol").chmod(0o755)
    script = (
        str(module.describe_snapshot())
        + f'\ngym_describe_snapshot {ids}\nfor id in "${{!gym_sc_of[@]}}"; do printf "%s=%s\\n" "$id" "${{gym_sc_of[$id]%% *}}"; done\n'
    )
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    out = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, check=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


def test_the_status_snapshot_knows_a_task_started_or_pending_by_its_array_task_id(tmp_path) -> None:
    says = (
        "JobId=1210 ArrayJobId=1200 ArrayTaskId=5 JobState=RUNNING\n"
        "JobId=1200 ArrayJobId=1200 ArrayTaskId=6-9,12%4 JobState=PENDING\n"
        "JobId=77 JobName=x JobState=PENDING\n"
    )
    found = snapshot_of(tmp_path, says, "1200_5,1200_7,1200_12,1200_10,77,1200_x")
    assert found == {"1200_5": "JobId=1210", "1200_7": "JobId=1200", "1200_12": "JobId=1200", "77": "JobId=77"}


def test_a_hostile_task_range_costs_only_the_tasks_asked_for(tmp_path) -> None:
    says = "JobId=1 ArrayJobId=1 ArrayTaskId=0-999999999999 JobState=PENDING\n"
    wanted = "1_3,1_99999,1_200001"
    assert snapshot_of(tmp_path, says, wanted) == {"1_3": "JobId=1", "1_99999": "JobId=1", "1_200001": "JobId=1"}


def test_cancel_asks_scancel_once_with_each_array_s_tasks_as_one_word(tmp_path, each_awk) -> None:
    rows = [
        ("r1", "a", "1200_0"),
        ("r1", "b", "1200_3"),
        ("r2", "a", "1300"),
        ("r2", "b", "1200_3"),
        ("r3", "a", "1201_1"),
    ]
    asked, _ = cancel_noted(tmp_path, rows, "exit 0")
    assert asked == ["1200_[0,3]", "1201_[1]", "1300"]


def cancel_noted(tmp_path, rows: list[tuple[str, str, str]], scancel: str) -> tuple[list[str], str]:
    """What the one scancel is asked (``scancel``: its shell body) and what cancel_noted prints."""
    from nemo_gym.orchestration.templating import _environment

    module = (
        _environment().get_template("backend-slurm.sh.j2").make_module({"backend_vars": SlurmBackend().template_vars()})
    )
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "bin" / "scancel").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" >>{tmp_path / "asked"}\n{scancel}\n')
    (tmp_path / "bin" / "scancel").chmod(0o755)
    listed = tmp_path / "list"
    listed.write_text("".join("\t".join(row) + "\n" for row in rows))
    script = f"gym_cancel_list={listed}\n{module.cancel_noted()}\n"
    env = {"PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin"}
    out = subprocess.run(["bash", "-c", script], env=env, check=True, capture_output=True, text=True).stdout
    return sorted((tmp_path / "asked").read_text().split()), out


def test_a_refused_cancel_of_an_array_s_tasks_refuses_each_of_them_and_nothing_else(tmp_path, each_awk) -> None:
    rows = [("r1", "a", "1200_0"), ("r2", "a", "1200_3"), ("r3", "a", "1300")]
    refusal = 'echo "scancel: error: Kill job error on job id 1200_[0,3]: Access/permission denied" >&2; exit 1'
    asked, out = cancel_noted(tmp_path, rows, refusal)
    assert asked == ["1200_[0,3]", "1300"]
    said = out.split()
    assert f"{contract.RUN_MARKER}r1" in said and f"{contract.RUN_MARKER}r2" in said
    assert f"{contract.RUN_MARKER}r3" not in said


def test_accounting_rows_of_array_tasks_are_read_as_the_task_s_gpu_hours() -> None:
    from nemo_gym.orchestration.usage import parse_accounting_row

    row = parse_accounting_row(["1200_5", "3600", "billing=4,cpu=1,gres/gpu=4,node=1"])
    assert row is not None and (row.job_id, row.elapsed_seconds) == ("1200_5", 3600)
    for hostile in ("1200_", "_5", "1_2_3", "12²"):
        assert parse_accounting_row([hostile, "3600", "gres/gpu=4"]) is None


def test_a_site_without_job_arrays_gets_none() -> None:
    assert SlurmBackend().most_queued_together({"config": "MaxArraySize = 0\n"}) == 0
    assert SlurmBackend().most_queued_together({}) == slurm_arrays.DEFAULT_MAX_ARRAY_SIZE
    assert arrays(units([job(i) for i in range(ARRAYS_FROM)]), {}, 0) == []
