"""Sweeps over a fake connection and a fake Slurm (tests/fakes): every combination checked before
anything is submitted, one script queueing every run's jobs, the records (each run's, the sweep's,
in the index and in every run directory), a sweep id naming all its runs, and status, results,
logs and cancel acting on every run. The scripts are the real ones, run by bash."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
import yaml
from fakes import FakeConnection
from hypothesis import given
from hypothesis import strategies as st

from nemo_gym.orchestration import contract, library
from nemo_gym.orchestration.cli.main import main
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.library import LogRequest, select, select_run
from nemo_gym.orchestration.record import all_sweeps, load_record, load_sweep_record
from nemo_gym.orchestration.sweep import RunLabels, run_labels, short_keys

HOST = "login.fake"
MODELS = "services.policy.model=/ckpt/step-1000,/ckpt/step-2000,/ckpt/step-3000"


@pytest.fixture
def config_file(base, tmp_path: Path) -> Path:
    base["compute"]["cluster"]["hostname"] = HOST
    base["job"]["output_path"] = str(tmp_path / "runs")
    base["driver"]["benchmarks"] = {"math": {}, "code": {}}
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(base, sort_keys=False))
    return path


def prepared(config_file: Path, *overrides: str) -> library.Prepared:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return library.prepare(library.compose(config_file, list(overrides or [MODELS]), multirun=True))


def submitted(config_file: Path, conn: FakeConnection, *overrides: str) -> library.Submission:
    submission = library.submit(prepared(config_file, *overrides), connect=conn.connect)
    assert submission.interrupted is None and not submission.failed
    return submission


def job_wrote(job_dir: str, job_id: str, phase: str, detail: str = "") -> None:
    state = Path(job_dir) / contract.state_dir(job_id)
    state.mkdir(parents=True, exist_ok=True)
    (state / contract.STATE_FILE).write_text(f"phase={phase}\ndetail={detail}\nattempt=0\n")


def over_the_fake(conn: FakeConnection, monkeypatch) -> None:
    """The command line's ssh connections reach the fake (the library's functions bind the real
    ``connect`` as their default, which opens an SSHConnection for a remote host)."""
    from nemo_gym.orchestration import connection

    monkeypatch.setattr(connection, "SSHConnection", conn.connect)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["eval", *args])
    out, err = capsys.readouterr()
    return code, out, err


# -- submission ------------------------------------------------------------------------------------


def test_a_sweep_queues_every_run_in_one_script_and_records_each_run_and_the_sweep(
    config_file, conn, cluster, tmp_path
) -> None:
    submission = submitted(config_file, conn)
    records = submission.records
    assert [r.sweep_values for r in records] == [
        {"services.policy.model": f"/ckpt/step-{n}"} for n in (1000, 2000, 3000)
    ]
    assert {r.sweep_id for r in records} == {submission.sweep.sweep_id}
    assert [[b.job_id for b in r.benchmarks] for r in records] == [["100", "101"], ["102", "103"], ["104", "105"]]
    # The site's limits asked, one script stages and queues everything, one more writes every record.
    assert len(conn.scripts) == 3 and conn.scripts[1].count("sbatch --parsable") == 6  # limits, submit, records
    # Each job script serves its own combination's model.
    for n, record in zip((1000, 2000, 3000), records):
        assert f"/ckpt/step-{n}" in (Path(record.run_dir) / "math" / "steps" / "policy.sh").read_text()
    sweep = submission.sweep
    assert sweep.swept == ["services.policy.model"] and [run.run_id for run in sweep.runs] == [
        r.gym_job_id for r in records
    ]
    assert all_sweeps() == [sweep]
    for record in records:
        assert load_record((Path(record.run_dir) / contract.RECORD_FILE).read_text()) == record
        assert load_sweep_record((Path(record.run_dir) / contract.SWEEP_RECORD_FILE).read_text()) == sweep
        assert load_record((tmp_path / "cache/nemo-gym/jobs" / f"{record.gym_job_id}.json").read_text()) == record


def test_a_bad_value_in_one_combination_stops_the_sweep_before_anything_is_submitted(
    config_file, conn, cluster
) -> None:
    with pytest.raises(UserError) as caught:
        prepared(config_file, MODELS, "++services.policy.port=8000,99999")
    assert caught.value.problems == [
        f"combination services.policy.model=/ckpt/step-{n}, services.policy.port=99999: services.policy.port: "
        f"99999 is not a TCP port; use a number from 1 to 65535"
        for n in (1000, 2000, 3000)
    ]
    assert conn.scripts == [] and not cluster.calls("sbatch")


def test_a_problem_of_every_combination_is_told_once(config_file) -> None:
    with pytest.raises(UserError) as caught:
        prepared(config_file, MODELS, "services.policy.prt=1")
    [problem] = caught.value.problems
    assert problem.startswith("override 'services.policy.prt=1': services.policy.prt is not in the config")


def test_a_missing_mount_of_one_combination_stops_the_whole_sweep(config_file, conn, cluster, tmp_path) -> None:
    there = tmp_path / "data"
    there.mkdir()
    sweep = prepared(config_file, f"++driver.mounts=[{there}:/data],[{tmp_path}/gone:/data]")
    with pytest.raises(
        UserError,
        match=r"driver\.mounts: source '.*/gone' does not exist on the submit host; create "
        r"it or fix the mount \(in run\(s\) gym-job-",
    ):
        library.submit(sweep, connect=conn.connect)
    assert not cluster.calls("sbatch") and not (tmp_path / "runs").exists()


@pytest.mark.parametrize("blocked", [0, 2])
def test_an_unwritable_run_directory_leaves_no_run_directory_behind(
    config_file, conn, cluster, tmp_path, blocked
) -> None:
    sweep = prepared(config_file)
    blocker = Path(sweep.runs[blocked].plan.run_dir).parent / "blocked"
    blocker.parent.mkdir(parents=True)
    # That run's directory cannot be made: a file stands where its parent should be.
    blocker.write_text("")
    object.__setattr__(sweep.runs[blocked].plan, "run_dir", f"{blocker}/run")
    with pytest.raises(UserError, match="could not write the run directory of 3 runs .*nothing was submitted"):
        library.submit(sweep, connect=conn.connect)
    assert not cluster.calls("sbatch")
    assert sorted(p.name for p in blocker.parent.iterdir()) == ["blocked"]


def test_a_connection_lost_mid_sweep_is_recovered_into_true_records_of_every_run(config_file, conn, cluster) -> None:
    conn.lose_during(2, after_output=f"{contract.JOB_MARKER}math:")  # after the first job of the second run, say
    sweep = prepared(config_file)
    second_run = sweep.runs[1].plan.run_id
    conn.plan.faults[2].after_output = f"{contract.RUN_MARKER}{second_run}\n{contract.JOB_MARKER}math:"
    submission = library.submit(sweep, connect=conn.connect)
    queued = [[b.job_id for b in run.benchmarks] for run in submission.records]
    assert queued == [["100", "101"], ["102", None], [None, None]]
    assert list(cluster.jobs()) == ["100", "101", "102"]  # nothing twice, nothing behind our back
    assert "3 of 6 job(s) of the sweep's 3 runs had been queued" in submission.interrupted
    assert f"gym eval cancel {sweep.sweep_id}" in submission.interrupted
    for run in submission.records:
        assert load_record((Path(run.run_dir) / contract.RECORD_FILE).read_text()) == run
    assert [r.gym_job_id for r in select([sweep.sweep_id]).records] == [m.plan.run_id for m in sweep.runs]


def test_a_sweeps_records_that_cannot_be_written_name_every_runs_queued_jobs(config_file, conn, cluster) -> None:
    conn.fail_file_writes("disk full")
    sweep = prepared(config_file)
    with pytest.raises(UserError) as caught:
        library.submit(sweep, connect=conn.connect)
    ids = [run.plan.run_id for run in sweep.runs]
    assert caught.value.problems == [
        f"6 job(s) of sweep {sweep.sweep_id} were queued but the records could not be written into the run "
        f"directories (disk full); already queued: run {ids[0]}: math=100, code=101; run {ids[1]}: math=102, "
        f"code=103; run {ids[2]}: math=104, code=105; the local index has them (gym eval status {sweep.sweep_id})"
    ]


def test_sweeping_the_submit_host_is_refused(config_file) -> None:
    with pytest.raises(UserError, match=r"^-m: the combinations are submitted from different hosts \(a, b\)"):
        prepared(config_file, "++compute.cluster.hostname=a,b")


def test_resolve_only_of_a_sweep_refuses_mixed_hosts_as_submit_would(config_file, capsys) -> None:
    code, out, err = cli(
        capsys, "submit", "-c", str(config_file), "-m", "--resolve-only", "++compute.cluster.hostname=a,b"
    )
    assert code == 1 and out == ""
    assert err.startswith("error: -m: the combinations are submitted from different hosts (a, b); a sweep is submitted")


def test_resolve_only_of_a_sweep_checks_gym_keys_but_a_lone_configs_does_not(config_file, capsys) -> None:
    code, out, err = cli(
        capsys, "submit", "-c", str(config_file), "-m", "--resolve-only", "++driver.benchmarks.math.run.limt=5"
    )
    assert code == 1 and out == ""
    assert err.startswith(
        "error: driver.benchmarks.math.run.limt: gym eval run reads no such key; did you mean 'limit'?"
    )
    code, out, _ = cli(
        capsys, "submit", "-c", str(config_file), "--resolve-only", "++driver.benchmarks.math.run.limt=5"
    )
    assert code == 0 and yaml.safe_load(out)["driver"]["benchmarks"]["math"]["run"]["limt"] == 5


def test_a_config_error_and_a_gym_key_error_of_two_combinations_are_told_together(config_file, capsys) -> None:
    swept = ["++services.policy.port=99999,8000", "++driver.benchmarks.math.run.limit=5,abc"]
    for resolve_only in ([], ["--resolve-only"]):
        code, out, err = cli(capsys, "submit", "-c", str(config_file), "-m", *swept, *resolve_only)
        assert code == 1 and out == ""
        lines = err.splitlines()
        assert lines[0] == (
            "error: combination services.policy.port=99999, driver.benchmarks.math.run.limit=5: "
            "services.policy.port: 99999 is not a TCP port; use a number from 1 to 65535"
        )
        assert lines[-1] == (
            "error: combination services.policy.port=8000, driver.benchmarks.math.run.limit=abc: "
            "driver.benchmarks.math.run.limit: gym eval run reads a whole number here, got 'abc'; "
            "give a whole number"
        )
        assert len(lines) == 3


# -- naming a sweep ----------------------------------------------------------------------------------


def test_a_sweep_id_or_part_of_it_or_last_names_every_run_in_order(config_file, conn, cluster) -> None:
    alone_config = prepared(config_file, "++job.deployment=per_benchmark").runs[0].config
    alone = library.submit(library.prepare(alone_config), connect=conn.connect).records[0]
    submission = submitted(config_file, conn)
    ids = [run.gym_job_id for run in submission.records]
    sweep_id = submission.sweep.sweep_id
    for name in (sweep_id, sweep_id[-6:], sweep_id[-6:-1], None):  # the hash, or a piece of it
        selection = select([name] if name else [])
        assert [r.gym_job_id for r in selection.records] == ids and selection.sweep == submission.sweep
    assert [r.gym_job_id for r in select([alone.gym_job_id, sweep_id]).records] == [alone.gym_job_id, *ids]
    assert select([ids[1]]).records[0].gym_job_id == ids[1]  # a run of a sweep, alone
    with pytest.raises(UserError, match=f"is sweep {sweep_id} of 3 runs; name one of its runs"):
        select_run(None, last=True)
    with pytest.raises(UserError, match="matches .* runs and sweeps"):
        select(["gym-"])


def test_labels_are_the_swept_values_headed_by_the_swept_keys(config_file, conn, cluster) -> None:
    records = submitted(config_file, conn, MODELS, "++driver.benchmarks.math.run.limit=1,2").records
    labels = run_labels(records[:2])
    assert labels.header == "model, limit"  # each key by the shortest suffix that tells it from the others
    assert labels.labels == ["/ckpt/step-1000, 1", "/ckpt/step-1000, 2"]


@pytest.mark.parametrize(
    ("keys", "shown"),
    [
        (["services.policy.model"], ["model"]),
        (["services.policy.model", "services.judge.model"], ["policy.model", "judge.model"]),
        (["a.b.c", "x.b.c", "c"], ["a.b.c", "x.b.c", "c"]),
        (["run.limit", "services.policy.port"], ["limit", "port"]),
    ],
)
def test_swept_keys_are_shown_by_their_shortest_telling_suffix(keys: list[str], shown: list[str]) -> None:
    assert list(short_keys(keys).values()) == shown


@given(st.lists(st.lists(st.sampled_from("abc"), min_size=1, max_size=4).map(".".join), min_size=1, max_size=6))
def test_shortened_keys_stay_distinct_suffixes_of_their_keys(keys: list[str]) -> None:
    names = short_keys(keys)
    assert len(set(names.values())) == len(names) == len(set(keys))
    for key, name in names.items():
        assert key == name or key.endswith("." + name)


def test_runs_outside_a_sweep_are_labelled_by_their_models_when_those_differ(config_file, conn, cluster) -> None:
    runs = [
        library.submit(
            library.prepare(
                prepared(config_file, f"services.policy.model=/ckpt/step-{n}", "++driver.policy_model=policy")
                .runs[0]
                .config
            ),
            connect=conn.connect,
        ).records[0]
        for n in (100, 200)
    ]
    assert [r.model for r in runs] == ["/ckpt/step-100", "/ckpt/step-200"] and [r.sweep_values for r in runs] == [
        {},
        {},
    ]
    assert run_labels(runs) == RunLabels("model", ["/ckpt/step-100", "/ckpt/step-200"])
    assert run_labels([runs[0], runs[0]]).header == "RUN"  # the same model twice: named by id (or directory)


# -- acting on every run ---------------------------------------------------------------------------


def test_status_of_a_sweep_shows_every_job_of_every_run(config_file, conn, cluster, capsys, monkeypatch) -> None:
    over_the_fake(conn, monkeypatch)
    submission = submitted(config_file, conn)
    cluster.set_state("100", "RUNNING")
    job_wrote(submission.records[0].benchmarks[0].job_dir, "100", "running", "driver")
    code, out, err = cli(capsys, "status", submission.sweep.sweep_id[-6:])
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == f"Sweep {submission.sweep.sweep_id} (slurm on {HOST}): 3 runs"
    assert lines[1].split() == ["model", "BENCHMARK", "JOB", "STATE", "GPU-HOURS", "WALL", "DETAIL"]
    rows = [line.split()[:4] for line in lines[2:8]]
    assert rows == [
        ["/ckpt/step-1000", "math", "100", "running"],
        ["/ckpt/step-1000", "code", "101", "queued"],
        ["/ckpt/step-2000", "math", "102", "queued"],
        ["/ckpt/step-2000", "code", "103", "queued"],
        ["/ckpt/step-3000", "math", "104", "queued"],
        ["/ckpt/step-3000", "code", "105", "queued"],
    ]
    code, out, _ = cli(capsys, "status", "--last", "--json")
    doc = json.loads(out)
    assert doc["sweep"] == submission.sweep.sweep_id
    assert [run["values"] for run in doc["runs"]] == [r.sweep_values for r in submission.records]
    assert sum(len(run["jobs"]) for run in doc["runs"]) == 6


def test_a_sweeps_status_is_one_round_trip_and_its_results_one_more(config_file, conn, cluster) -> None:
    records = submitted(config_file, conn).records
    cluster.set_state("100", "RUNNING")
    cluster.set_state("103", "COMPLETED")
    job_wrote(records[0].benchmarks[0].job_dir, "100", "running", "driver")
    job_wrote(records[1].benchmarks[1].job_dir, "103", "succeeded", "driver finished")
    before, asked = len(conn.scripts), len(cluster.calls("scontrol")) + len(cluster.calls("sacct"))
    statuses = library.status(records, connect=conn.connect)
    assert len(conn.scripts) == before + 1  # three runs, one probe
    # Slurm asked once for the six jobs: one scontrol of every job it holds, one sacct of those ids.
    calls = cluster.calls("scontrol")[len(cluster.calls("scontrol")) - 1 :] + cluster.calls("sacct")
    assert len(cluster.calls("scontrol")) + len(cluster.calls("sacct")) - asked <= 3, calls
    assert [[(j.job_id, j.state) for j in s.jobs] for s in statuses] == [
        [("100", "running"), ("101", "queued")],
        [("102", "queued"), ("103", "succeeded")],
        [("104", "queued"), ("105", "queued")],
    ]
    assert [s.record.gym_job_id for s in statuses] == [r.gym_job_id for r in records]
    before = len(conn.scripts)
    results = library.results(records, connect=conn.connect)
    assert len(conn.scripts) == before + 2  # the states at once, then every run's files at once
    assert conn.scripts[-1].count("gym_projection=") == 1  # the projection's source sent once
    assert [[j.state for j in r.statuses] for r in results] == [[j.state for j in s.jobs] for s in statuses]


def test_cancel_of_a_sweep_cancels_what_still_runs_in_every_run(
    config_file, conn, cluster, capsys, monkeypatch
) -> None:
    over_the_fake(conn, monkeypatch)
    submission = submitted(config_file, conn)
    cluster.set_state("100", "COMPLETED")
    job_wrote(submission.records[0].benchmarks[0].job_dir, "100", "succeeded", "driver finished")
    for job_id in ("101", "102", "103"):
        cluster.set_state(job_id, "RUNNING")
    before = len(conn.scripts)
    code, out, err = cli(capsys, "cancel", submission.sweep.sweep_id)
    assert code == 0, err
    assert len(conn.scripts) == before + 2  # one probe, one cancel script for the three runs
    assert sorted(cluster.cancelled_ids()) == ["101", "102", "103", "104", "105"]
    assert len(cluster.calls("scancel")) == 1  # every run's jobs in one scancel
    assert "  /ckpt/step-1000: math: already succeeded, nothing to cancel" in out.splitlines()
    assert "  /ckpt/step-3000: cancelled code (job 105)" in out.splitlines()
    reports = library.cancel(submission.records, ["math"], connect=conn.connect)
    assert all(not report.cancelled for report in reports)
    with pytest.raises(UserError, match="has no benchmark 'nope'"):
        library.cancel(submission.records, ["nope"], connect=conn.connect)


def test_logs_of_a_sweep_are_each_runs_under_its_label(config_file, conn, cluster, capsys, monkeypatch) -> None:
    over_the_fake(conn, monkeypatch)
    submission = submitted(config_file, conn)
    first, second = submission.records[:2]
    driver_log = Path(first.benchmarks[0].job_dir) / contract.step_log("driver", "100")
    driver_log.parent.mkdir(parents=True, exist_ok=True)
    driver_log.write_text("rollout 1\n")
    found = library.logs([first, second], LogRequest("math", driver=True), connect=conn.connect)
    assert (
        found[0].text == "rollout 1\n" and found[1].text is None and "no log of the driver for math" in found[1].problem
    )
    code, out, err = cli(capsys, "logs", "--last", "math", "--driver")
    assert code == 0, err
    assert out.startswith(f"==> /ckpt/step-1000 ({first.gym_job_id}) <==\nrollout 1\n==> /ckpt/step-2000")
    with pytest.raises(UserError, match="has 2 benchmarks; name one: math, code"):
        library.logs([first, second], LogRequest(driver=True), connect=conn.connect)
    code, _, err = cli(capsys, "logs", "--last", "math", "-f")
    assert code == 1 and err.startswith("error: -f follows one run's log; name one run of sweep")


def test_list_shows_a_sweep_and_its_runs_by_their_values(config_file, conn, cluster, capsys) -> None:
    submission = submitted(config_file, conn)
    code, out, _ = cli(capsys, "list")
    lines = out.splitlines()
    assert lines[1].split()[0] == submission.sweep.sweep_id
    assert lines[1].endswith("sweep of 3 runs over model")
    assert [line.split()[0] for line in lines[2:5]] == [run.gym_job_id for run in submission.records]
    assert lines[4].split()[-1] == "model=/ckpt/step-3000"


# -- the command line --------------------------------------------------------------------------------


def test_dry_run_of_a_sweep_stages_one_directory_per_run(config_file, tmp_path, capsys) -> None:
    stage = tmp_path / "stage"
    code, out, err = cli(capsys, "submit", "-c", str(config_file), "-m", MODELS, "--dry-run", "--stage-dir", str(stage))
    assert code == 0, err
    runs = sorted(stage.iterdir())
    assert len(runs) == 3 and all((run / "math" / contract.JOB_SCRIPT).is_file() for run in runs)
    assert out.splitlines()[0].endswith("would submit 6 job(s) for 3 run(s) on login.fake")
    models = {
        yaml.safe_load((run / contract.RESOLVED_CONFIG_FILE).read_text())["services"]["policy"]["model"] for run in runs
    }
    assert models == {"/ckpt/step-1000", "/ckpt/step-2000", "/ckpt/step-3000"}


def test_resolve_only_prints_each_combinations_config(config_file, capsys) -> None:
    code, out, _ = cli(capsys, "submit", "-c", str(config_file), "-m", MODELS, "--resolve-only")
    documents = list(yaml.safe_load_all(out))
    assert code == 0 and [d["services"]["policy"]["model"] for d in documents] == [
        "/ckpt/step-1000",
        "/ckpt/step-2000",
        "/ckpt/step-3000",
    ]
    assert out.startswith("--- # run 1 of 3: services.policy.model=/ckpt/step-1000\n")
    code, out, _ = cli(capsys, "submit", "-c", str(config_file), "-m", MODELS, "--resolve-only", "--json")
    assert [run["values"] for run in json.loads(out)["runs"]][2] == {"services.policy.model": "/ckpt/step-3000"}


def test_submit_of_a_sweep_prints_each_run_and_its_jobs(config_file, conn, cluster, capsys, monkeypatch) -> None:
    over_the_fake(conn, monkeypatch)
    code, out, err = cli(capsys, "submit", "-c", str(config_file), "-m", MODELS)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("Sweep gym-sweep-") and lines[0].endswith(": 3 runs over services.policy.model")
    assert "(services.policy.model=/ckpt/step-2000)" in lines[4] and lines[5] == "  submitted math -> Slurm job 102"


def test_stage_dir_without_dry_run_is_one_line(config_file, capsys) -> None:
    code, _, err = cli(capsys, "submit", "-c", str(config_file), "--stage-dir", "x")
    assert code == 1 and err == "error: --stage-dir writes what --dry-run renders; add --dry-run\n"


def test_a_refused_sweep_leaves_no_output_directory_behind(config_file, conn, cluster, tmp_path) -> None:
    sweep = prepared(config_file, MODELS, f"job.output_path={tmp_path}/fresh/deeper/runs")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    object.__setattr__(sweep.runs[2].plan, "run_dir", f"{blocker}/run")  # cannot be made: a file is its parent
    with pytest.raises(UserError, match="could not write the run directory of 3 runs .*nothing was submitted"):
        library.submit(sweep, connect=conn.connect)
    assert not cluster.calls("sbatch")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in ("slurm", "cache")) == ["a-file", "eval.yaml"]
