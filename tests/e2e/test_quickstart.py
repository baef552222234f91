"""The quickstart for real: `vllm serve` (CPU build) with the tiny locally built model, and NeMo
Gym's `gym eval run` on the offline answer-judge benchmark — locally and on the Slurm cluster.
Needs the environments of scripts/setup-envs (scripts/test builds them)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ENVS = Path(os.environ.get("GYM_ENVS_DIR", Path.home() / ".cache" / "gym-orchestration" / "envs"))

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.fixture(scope="module")
def envs() -> Path:
    ready = all((ENVS / part / ".setup-envs-done").exists() for part in ("vllm", "gym", "models/tiny-llama"))
    if not ready:
        if os.environ.get("GYM_REQUIRE_CLUSTER") == "1":
            pytest.fail(f"the model and driver environments are missing under {ENVS} (scripts/setup-envs)")
        pytest.skip(f"no environments under {ENVS} (run scripts/setup-envs)")
    return ENVS


def gym(tmp_path: Path, *args: str, path_prefix: str = "") -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "GYM_ENVS_DIR": str(ENVS),
        "GYM_RUNS_DIR": str(tmp_path / "runs"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    if path_prefix:
        env["PATH"] = f"{path_prefix}:{env['PATH']}"
    return subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )


def signal_processes_of(job_dir: Path, word: bytes, signum: int) -> list[int]:
    """Send signum to this machine's processes of one job (GYM_JOB_DIR in their environment: the
    cluster's nodes are network namespaces, so their processes are ours to see) whose command line
    holds word; the pids signalled."""
    mark = f"GYM_JOB_DIR={job_dir}".encode()
    signalled = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if mark not in (proc / "environ").read_bytes().split(b"\0") or word not in (proc / "cmdline").read_bytes():
                continue
            os.kill(int(proc.name), signum)
        except (OSError, ProcessLookupError):
            continue  # gone meanwhile
        signalled.append(int(proc.name))
    return signalled


def run_quickstart(tmp_path: Path, config: str, *overrides: str, path_prefix: str = "") -> tuple[dict, dict]:
    submitted = gym(
        tmp_path, "submit", "-c", str(REPO / "examples" / config), "--json", *overrides, path_prefix=path_prefix
    )
    assert submitted.returncode == 0, submitted.stderr
    record = json.loads(submitted.stdout)
    watched = gym(tmp_path, "status", record["gym_job_id"], "--watch", "--json", "--interval", "1")
    return record, json.loads(watched.stdout)


def assert_real_results(record: dict, status: dict) -> None:
    [job] = status["jobs"]
    job_dir = Path(job["job_dir"])
    assert job["state"] == "succeeded", (job_dir / f"slurm-{job['job_id']}.out").read_text()
    rollouts = [json.loads(line) for line in (job_dir / "artifacts" / "rollouts.jsonl").read_text().splitlines()]
    assert len(rollouts) == 12  # every answer-judge task
    assert all("reward" in r and isinstance(r["reward"], (int, float)) for r in rollouts)
    assert sorted(r["_ng_task_index"] for r in rollouts) == list(range(12))
    metrics = json.loads((job_dir / "artifacts" / "rollouts_aggregate_metrics.json").read_text())
    assert "mean/reward" in metrics[0]["key_metrics"]
    logs = {p.name for p in (job_dir / "logs").iterdir()}
    assert {f"policy-{job['job_id']}.log", f"driver-{job['job_id']}.log"} <= logs
    assert "Application startup complete" in (job_dir / "logs" / f"policy-{job['job_id']}.log").read_text()


def assert_exported(record: dict, status: dict, server, python: str, table: Path) -> None:
    """One MLflow run with the real metrics, the params and the rollouts as an artifact; a table row."""
    from mlflow_server import mlflow_runs

    [job] = status["jobs"]
    assert {name: receipt["state"] for name, receipt in job["exports"].items()} == {"mlflow": "done", "table": "done"}
    [run] = mlflow_runs(python, server, "quickstart", f"{record['gym_job_id']}/answer-judge")
    job_dir = Path(job["job_dir"])
    metrics = json.loads((job_dir / "artifacts" / "rollouts_aggregate_metrics.json").read_text())
    assert run["metrics"]["mean/reward"] == metrics[0]["key_metrics"]["mean/reward"]
    assert run["metrics"]["gym/samples_written"] == run["metrics"]["gym/samples_expected"] == 12
    assert run["params"]["services.policy.served_model_name"] == "tiny"
    assert "rollouts.jsonl" in run["artifacts"] and run["status"] == "FINISHED"
    import csv

    [row] = list(csv.DictReader((table / "results.csv").open()))
    assert (row["run_id"], row["benchmark"], row["state"]) == (record["gym_job_id"], "answer-judge", "succeeded")
    assert (row["samples_written"], row["samples_expected"], row["complete"]) == ("12", "12", "true")


def assert_usage_is_the_jobs_own_record(job: dict, gpus: int) -> None:
    """Without accounting: wall time from the job's own job-start/job-end, times the GPUs it held."""
    times = {}
    for line in (Path(job["job_dir"]) / ".gym" / job["job_id"] / "events").read_text().splitlines():
        stamp, _, event = line.partition(" ")
        times[event] = float(stamp)
    wall = times["job-end 0"] - times["job-start"]
    assert 10 < wall < 600
    assert (job["gpus"], job["usage_source"], job["wall_seconds"]) == (gpus, "job record", round(wall, 1))
    assert job["gpu_hours"] == round(gpus * wall / 3600, 4)


def assert_info_says_what_it_ran(tmp_path: Path, record: dict) -> None:
    """gym eval info shows the gym and vLLM the job's nodes ran (the real ones: gym --version's
    first line, vLLM's GET /version), the inputs digest and the results fingerprint, the same as
    results --json."""
    info = gym(tmp_path, "info", record["gym_job_id"], "--json")
    assert info.returncode == 0, info.stdout + info.stderr
    [bench] = json.loads(info.stdout)["runs"][0]["benchmarks"]
    made = bench["made_from"]
    assert made["versions"]["gym_version"] == "NeMo Gym v0.7.0", made
    assert re.fullmatch(r"0\.\d+\.\d+.*", made["versions"]["vllm_version.policy"]), made
    assert re.fullmatch(r"[0-9a-f]{64}", made["inputs_digest"]) and re.fullmatch(
        r"[0-9a-f]{64}", made["results_fingerprint"]
    )
    results = json.loads(gym(tmp_path, "results", record["gym_job_id"], "--json").stdout)["benchmarks"][0]
    assert (results["inputs_digest"], results["results_fingerprint"], results["provenance"]) == (
        made["inputs_digest"],
        made["results_fingerprint"],
        made["versions"],
    )
    text = gym(tmp_path, "info", record["gym_job_id"]).stdout
    assert "ran:      gym_version NeMo Gym v0.7.0, vllm_version.policy 0." in text, text


def assert_the_next_dry_run_is_estimated_from_this_run(
    tmp_path: Path, status: dict, config: str, path_prefix: str = ""
) -> None:
    """What status saw this run cost is in the index: the next dry run of the same benchmark on the
    same footprint is estimated from it, and a job.max_gpu_hours below that estimate is refused."""
    [job] = status["jobs"]
    config_path = str(REPO / "examples" / config)
    dry = gym(tmp_path, "submit", "-c", config_path, "--dry-run", path_prefix=path_prefix)
    assert dry.returncode == 0, dry.stderr
    gpus = job["gpus"]
    said = f"(median of 1 earlier run on {gpus} GPU{'s' if gpus != 1 else ''})"
    assert re.search(
        r"^estimate: answer-judge: ~\d+\.\d\d GPU-hours, ~\S+ wall " + re.escape(said), dry.stderr, re.M
    ), dry.stderr
    if job["gpu_hours"]:
        budget = f"++job.max_gpu_hours={job['gpu_hours'] / 2}"
        refused = gym(tmp_path, "submit", "-c", config_path, "--dry-run", budget, path_prefix=path_prefix)
        assert refused.returncode == 1, refused.stderr
        assert "job.max_gpu_hours: this run is estimated at" in refused.stderr, refused.stderr


def assert_results_can_be_trusted_and_compared(tmp_path: Path, record: dict) -> None:
    """The live run's results are 12/12; a copy elsewhere with rows removed is incomplete and fails
    results; a copy with flipped rewards is a significant improvement, and the gate fails the reverse."""
    results = gym(tmp_path, "results", record["gym_job_id"], "--json")
    assert results.returncode == 0, results.stdout + results.stderr
    [bench] = json.loads(results.stdout)["benchmarks"]
    assert (bench["state"], bench["complete"], bench["samples"], bench["expected_samples"]) == (
        "succeeded",
        True,
        12,
        12,
    )
    assert bench["missing"] == [] and bench["duplicates"] == 0
    copies = tmp_path / "archive"
    incomplete, flipped = copies / "incomplete", copies / "flipped"
    shutil.copytree(record["run_dir"], incomplete)
    shutil.copytree(record["run_dir"], flipped)
    rows_file = Path("answer-judge") / "artifacts" / "rollouts.jsonl"
    rows = [json.loads(line) for line in (incomplete / rows_file).read_text().splitlines()]
    (incomplete / rows_file).write_text(
        "".join(json.dumps(r) + "\n" for r in rows if r["_ng_task_index"] not in (2, 9))
    )
    cut = gym(tmp_path, "results", str(incomplete))
    assert cut.returncode == 1, cut.stdout
    assert (
        "answer-judge  incomplete  10/12" in cut.stdout and "missing task 2 rollout 0, task 9 rollout 0" in cut.stdout
    )
    up = {1, 3, 4, 6, 7, 8, 10}
    (flipped / rows_file).write_text(
        "".join(json.dumps({**r, "reward": 1.0 if r["_ng_task_index"] in up else r["reward"]}) + "\n" for r in rows)
    )
    base_rewards = {r["_ng_task_index"]: r["reward"] for r in rows}
    assert set(base_rewards.values()) == {0.0}  # random weights: the comparison's arithmetic is exact
    compared = gym(tmp_path, "compare", record["run_dir"], str(flipped), "--json", "--fail-on-regression")
    assert compared.returncode == 0, compared.stderr
    [b] = json.loads(compared.stdout)["benchmarks"]
    assert (b["delta"], b["improved"], b["regressed"], b["verdict"]) == (7 / 12, sorted(up), [], "improved")
    assert b["p_adjusted"] == b["p_value"] and b["detectable_drop"] == 0.5  # McNemar's least: 6 of 12 tasks
    reverse = gym(tmp_path, "compare", str(flipped), record["gym_job_id"], "--fail-on-regression")
    assert reverse.returncode == 1 and "regression gate: failed (answer-judge regressed)" in reverse.stdout
    # A plan before spending, from this real run and from the pair: tasks x repeats and what it costs.
    for pair in ([record["gym_job_id"]], [record["run_dir"], str(flipped)]):
        planned = gym(tmp_path, "plan", *pair, "--detect", "0.6")
        assert planned.returncode == 0, planned.stderr
        assert "TASKS x REPEATS" in planned.stdout and "GPU-HOURS <=" in planned.stdout
        [row] = [line for line in planned.stdout.splitlines() if line.startswith("answer-judge")]
        assert " x 1 " in row, planned.stdout  # one repeat in the pilot: tasks are planned


def assert_resubmit_generates_only_the_missing(tmp_path: Path, record: dict, server, python: str, table: Path) -> None:
    """The live run with 4 rows removed reads incomplete 8/12; gym eval resubmit finishes it in
    place: the new attempt is given exactly the 4 missing rows, the 8 kept rows stay byte for byte,
    gym's own aggregate covers all 12 rows again, and the MLflow run and the table row are updated
    under the same key (never a second one)."""
    from mlflow_server import mlflow_runs

    run_id = record["gym_job_id"]
    job_dir = Path(record["run_dir"]) / "answer-judge"
    rows_file, metrics_file = (
        job_dir / "artifacts" / "rollouts.jsonl",
        job_dir / "artifacts" / "rollouts_aggregate_metrics.json",
    )
    metrics_of_twelve = json.loads(metrics_file.read_text())[0]["agent_metrics"]
    removed = {1, 4, 8, 10}
    lines = rows_file.read_bytes().splitlines(keepends=True)
    kept = [line for line in lines if json.loads(line)["_ng_task_index"] not in removed]
    rows_file.write_bytes(b"".join(kept))
    status = gym(tmp_path, "status", run_id, "--json")
    [job] = json.loads(status.stdout)["jobs"]
    assert (job["state"], job["samples"], job["expected_samples"]) == ("incomplete", 8, 12), status.stdout

    resubmitted = gym(tmp_path, "resubmit", run_id, "--json")
    assert resubmitted.returncode == 0, resubmitted.stdout + resubmitted.stderr
    [bench] = json.loads(resubmitted.stdout)["runs"][0]["benchmarks"]
    assert (bench["remedy"], bench["attempt"], bench["inputs"]) == ("generate-missing", 2, 4)
    inputs = (job_dir / ".gym" / "attempts" / "2" / "inputs.jsonl").read_text().splitlines()
    assert sorted(json.loads(row)["_ng_task_index"] for row in inputs) == sorted(removed)

    watched = gym(tmp_path, "status", run_id, "--watch", "--json", "--interval", "1")
    [job] = json.loads(watched.stdout)["jobs"]
    assert (job["state"], job["samples"], job["expected_samples"], job["attempts"]) == ("succeeded", 12, 12, 2), (
        job_dir / f"slurm-{job['job_id']}.out"
    ).read_text()
    assert job["job_id"] == bench["job_id"] and [a["job_id"] for a in job["attempt_history"]][1] == bench["job_id"]
    after = rows_file.read_bytes().splitlines(keepends=True)
    assert after[: len(kept)] == kept  # the kept rows, byte for byte, where they were
    assert sorted(json.loads(line)["_ng_task_index"] for line in after[len(kept) :]) == sorted(removed)
    # gym's own aggregate, over the 12 merged rows: the per-prompt token counts make it the same as the first's.
    assert json.loads(metrics_file.read_text())[0]["agent_metrics"] == metrics_of_twelve
    [run] = mlflow_runs(python, server, "quickstart", f"{run_id}/answer-judge")
    assert run["metrics"]["gym/samples_written"] == 12 and run["status"] == "FINISHED"
    import csv

    assert len(list(csv.DictReader((table / "results.csv").open()))) == 1
    results = gym(tmp_path, "results", run_id)
    assert results.returncode == 0 and "answer-judge  succeeded  12/12" in results.stdout, results.stdout
    again = gym(tmp_path, "resubmit", run_id)
    assert again.returncode == 0 and "nothing to do: it succeeded with all 12 samples" in again.stdout, again.stdout


def test_quickstart_locally(envs, tmp_path, mlflow_server, backend_python) -> None:
    # The local backend counts the GPUs this machine shows at submit: two, from a stand-in nvidia-smi.
    fake_smi = tmp_path / "bin" / "nvidia-smi"
    fake_smi.parent.mkdir()
    fake_smi.write_text("#!/bin/sh\necho 'GPU 0: Fake (UUID: GPU-0)'\necho 'GPU 1: Fake (UUID: GPU-1)'\n")
    fake_smi.chmod(0o755)
    # With an MLflow and a table export: the job sends its results there itself, once it has ended.
    exports = [
        f"++job.export.mlflow.tracking_uri={mlflow_server.url}",
        "++job.export.mlflow.experiment=quickstart",
        f"++job.export.table.dir={tmp_path / 'table'}",
    ]
    record, status = run_quickstart(tmp_path, "quickstart.yaml", *exports, path_prefix=str(fake_smi.parent))
    assert record["executor"] == "local"
    assert_real_results(record, status)
    assert_exported(record, status, mlflow_server, backend_python, tmp_path / "table")
    assert_usage_is_the_jobs_own_record(status["jobs"][0], gpus=2)
    results = gym(tmp_path, "results", record["gym_job_id"])
    assert results.returncode == 0, results.stdout + results.stderr
    assert "answer-judge  succeeded  12/12" in results.stdout and "mean/reward=" in results.stdout
    assert_info_says_what_it_ran(tmp_path, record)
    assert_results_can_be_trusted_and_compared(tmp_path, record)
    assert_the_next_dry_run_is_estimated_from_this_run(tmp_path, status, "quickstart.yaml", str(fake_smi.parent))
    assert_resubmit_generates_only_the_missing(tmp_path, record, mlflow_server, backend_python, tmp_path / "table")


def test_the_quickstart_in_two_shards_ends_complete_with_the_metrics_of_the_whole(envs, tmp_path) -> None:
    """shards: 2 on this machine with the real vLLM and gym: the local backend runs the two shards one
    after another, each with its own vLLM, each given its half of the 12 tasks by gym's prepared
    inputs (gym dataset collate, sliced, gym eval run on the slice); the second merges them with gym
    eval aggregate: 12/12, and gym's aggregate metrics of the merged rows are those of the same
    benchmark run whole (with random weights every reward is 0, and the per-prompt token counts
    make gym's metrics the same for the same tasks, as the resubmit test shows)."""
    record, status = run_quickstart(tmp_path / "sharded", "quickstart.yaml", "+driver.benchmarks.answer-judge.shards=2")
    [job] = status["jobs"]
    [bench] = record["benchmarks"]
    shard_dirs = [Path(shard["job_dir"]) for shard in bench["shards"]]
    assert job["state"] == "succeeded", [
        (d / f"slurm-{s['job_id']}.out").read_text() for d, s in zip(shard_dirs, bench["shards"])
    ]
    assert (job["samples"], job["expected_samples"], job["complete"]) == (12, 12, True)
    for k, shard_dir in enumerate(shard_dirs, 1):
        rows = [json.loads(line) for line in (shard_dir / "artifacts" / "rollouts.jsonl").read_text().splitlines()]
        assert sorted(r["_ng_task_index"] for r in rows) == list(range(k - 1, 12, 2))  # its half, by global index
        assert not (shard_dir / "artifacts" / "rollouts_aggregate_metrics.json").exists()  # gym did not aggregate it
    merged_dir = Path(bench["job_dir"]) / "artifacts"
    merged = [json.loads(line) for line in (merged_dir / "rollouts.jsonl").read_text().splitlines()]
    assert [(r["_ng_task_index"], r["_ng_rollout_index"]) for r in merged] == [(i, 0) for i in range(12)]
    sharded_metrics = json.loads((merged_dir / "rollouts_aggregate_metrics.json").read_text())[0]
    results = gym(tmp_path / "sharded", "results", record["gym_job_id"])
    assert results.returncode == 0 and "answer-judge  succeeded  12/12" in results.stdout, results.stdout

    whole, whole_status = run_quickstart(tmp_path / "whole", "quickstart.yaml")
    assert_real_results(whole, whole_status)
    whole_metrics = json.loads(
        (Path(whole_status["jobs"][0]["job_dir"]) / "artifacts" / "rollouts_aggregate_metrics.json").read_text()
    )[0]
    assert sharded_metrics["agent_metrics"] == whole_metrics["agent_metrics"]
    assert sharded_metrics["key_metrics"] == whole_metrics["key_metrics"]


def test_a_local_sweep_over_three_temperatures_starts_vllm_once(envs, tmp_path) -> None:
    """Three runs that differ only in the driver's sampling (job.deployment=shared): one job, the
    first run's, starts the real vLLM once and runs every run's benchmark against it, each in its
    own run's directory with its own results and its own temperature."""
    temperature = "++driver.benchmarks.answer-judge.run.responses_create_params.temperature"
    submitted = gym(
        tmp_path,
        "submit",
        "-c",
        str(REPO / "examples" / "quickstart.yaml"),
        "-m",
        f"{temperature}=0.2,0.6,1.0",
        "++job.deployment=shared",
        "--json",
    )
    assert submitted.returncode == 0, submitted.stderr
    assert "they share 1 deployment(s)" in submitted.stderr
    sweep = json.loads(submitted.stdout)
    host, *guests = sweep["records"]
    watched = gym(tmp_path, "status", sweep["sweep_id"], "--watch", "--json", "--interval", "2")
    runs = json.loads(watched.stdout)["runs"]
    shared_dir = Path(host["run_dir"]) / "shared-deployment"
    assert [job["state"] for run in runs for job in run["jobs"]] == ["succeeded"] * 3, (
        shared_dir / f"slurm-{host['benchmarks'][0]['job_id']}.out"
    ).read_text()
    assert [(job["samples"], job["expected_samples"]) for run in runs for job in run["jobs"]] == [(12, 12)] * 3
    # vLLM started once: one policy log, in the host's shared job, none in the guests' runs.
    [policy_log] = list((shared_dir / "logs").glob("policy-*.log"))
    assert policy_log.read_text().count("Application startup complete") == 1
    assert not any((Path(guest["run_dir"]) / "shared-deployment").exists() for guest in guests)
    for record, value in zip(sweep["records"], ("0.2", "0.6", "1.0")):
        job_dir = Path(record["run_dir"]) / "answer-judge"
        assert f"responses_create_params.temperature={value}" in (job_dir / "steps" / "driver.sh").read_text()
        rows = (job_dir / "artifacts" / "rollouts.jsonl").read_text().splitlines()
        assert len(rows) == 12 and json.loads(rows[0])["responses_create_params"]["temperature"] == float(value)
    results = gym(tmp_path, "results", sweep["sweep_id"])
    assert results.returncode == 0, results.stdout + results.stderr


def assert_exported_after_the_fact(tmp_path: Path, record: dict, server, python: str) -> None:
    """The run was submitted without job.export: gym eval export sends it to a real MLflow server
    named on the command line, one run with its metrics and its rollouts."""
    from mlflow_server import mlflow_runs

    exported = gym(
        tmp_path, "export", record["gym_job_id"], "--to", "mlflow", "--tracking-uri", server.url, "--experiment", "late"
    )
    assert exported.returncode == 0 and "export mlflow: done" in exported.stdout, exported.stdout + exported.stderr
    [run] = mlflow_runs(python, server, "late", f"{record['gym_job_id']}/answer-judge")
    metrics = json.loads(
        (Path(record["run_dir"]) / "answer-judge" / "artifacts" / "rollouts_aggregate_metrics.json").read_text()
    )
    assert run["metrics"]["mean/reward"] == metrics[0]["key_metrics"]["mean/reward"]
    assert run["metrics"]["gym/samples_written"] == 12 and run["status"] == "FINISHED"
    assert "rollouts.jsonl" in run["artifacts"]


def test_bad_model_path_fails_fast_naming_the_service(envs, tmp_path) -> None:
    start = time.monotonic()
    record, status = run_quickstart(tmp_path, "quickstart.yaml", "services.policy.model=/nonexistent/model")
    [job] = status["jobs"]
    assert job["state"] == "failed"
    assert job["detail"].startswith("service policy died")
    assert time.monotonic() - start < 120  # not the 600 s health timeout
    out = (Path(job["job_dir"]) / f"slurm-{job['job_id']}.out").read_text()
    assert "service policy died" in out and "/nonexistent/model" in out


def test_a_resumable_quickstart_cut_by_its_walltime_continues_from_its_rollouts(envs, slurm, tmp_path) -> None:
    """The real vLLM and gym on Slurm: once rollouts appear, the model server is frozen (SIGSTOP: a
    server that stops answering) and the job's time limit lowered to what it has already run (a real
    Slurm TIMEOUT, at a moment the test knows, whatever the machine's speed); the job queued behind
    it resumes with gym's resume_from_cache and finishes the rest, each rollout once."""
    # Racing the collection against Slurm's enforcement (up to 30 s + KillWait) lost on a quiet CI
    # machine: all 288 rollouts were written before the cut. A frozen server writes none meanwhile.
    repeats = 12
    submitted = gym(
        tmp_path,
        "submit",
        "-c",
        str(REPO / "examples" / "quickstart-slurm.yaml"),
        "--json",
        "+driver.benchmarks.answer-judge.resumable=true",
        f"+driver.benchmarks.answer-judge.run.num_repeats={repeats}",
        "+driver.benchmarks.answer-judge.run.num_samples_in_parallel=1",
    )
    assert submitted.returncode == 0, submitted.stderr
    record = json.loads(submitted.stdout)
    [job] = record["benchmarks"]
    job_dir = Path(job["job_dir"])
    rollouts = job_dir / "artifacts" / "rollouts.jsonl"
    deadline = time.monotonic() + 300
    while not rollouts.exists() or len(rollouts.read_text().splitlines()) < 5:
        assert time.monotonic() < deadline, "no rollouts within 300 s"
        time.sleep(0.5)
    frozen = signal_processes_of(job_dir, b"vllm", signal.SIGSTOP)
    assert frozen, "no vLLM process of this job to freeze"
    subprocess.run(["scontrol", "update", f"jobid={job['job_id']}", "TimeLimit=1"], check=True)
    try:
        watched = gym(tmp_path, "status", record["gym_job_id"], "--watch", "--json", "--interval", "2")
        [final] = json.loads(watched.stdout)["jobs"]
    finally:
        ids = [
            line.split("\t")[1]
            for line in (job_dir / ".gym" / "chain").read_text().splitlines()
            if line.split("\t")[0] in ("start", "successor")
        ]
        subprocess.run(["scancel", *ids], capture_output=True)
        signal_processes_of(job_dir, b"vllm", signal.SIGKILL)  # none left once Slurm has ended the job
    assert final["state"] == "succeeded", final
    first, second = final["chain"]
    assert (
        subprocess.run(["scontrol", "show", "job", "-o", first], capture_output=True, text=True).stdout.count(
            "JobState=TIMEOUT"
        )
        == 1
    )
    chain = [line.split("\t") for line in (job_dir / ".gym" / "chain").read_text().splitlines()]
    [verdict] = [r for r in chain if r[0] == "verdict"]
    kept = int(verdict[4])
    assert verdict[2] == "timeout" and verdict[5] == "free" and 5 <= kept < 12 * repeats, verdict
    rows = [json.loads(line) for line in rollouts.read_text().splitlines()]
    keys = sorted((r["_ng_task_index"], r["_ng_rollout_index"]) for r in rows)
    assert keys == sorted({*keys}) and len(keys) == 12 * repeats  # each rollout once: nothing lost, nothing twice
    second_log = (job_dir / "logs" / f"driver-{second}.log").read_text(errors="replace")
    assert "Skipping resume_from_cache" not in second_log  # gym really resumed from the cache
    metrics = json.loads((job_dir / "artifacts" / "rollouts_aggregate_metrics.json").read_text())
    assert f"pass@1[avg-of-{repeats}]/accuracy" in metrics[0]["key_metrics"]  # over every repeat, both jobs'


def test_two_quickstarts_five_seconds_apart_each_answered_by_its_own_server(envs, tmp_path) -> None:
    """Two checkpoints submitted one after the other on this machine, on the quickstart's one port:
    the second waits, shown queued behind the first, and every rollout of each run was answered by
    its own run's vLLM (the model name the server answered with is that run's)."""
    one, two = tmp_path / "one", tmp_path / "two"
    first = gym(
        one,
        "submit",
        "-c",
        str(REPO / "examples" / "quickstart.yaml"),
        "--json",
        "services.policy.served_model_name=tiny-one",
    )
    assert first.returncode == 0, first.stderr
    time.sleep(5)
    second = gym(
        two,
        "submit",
        "-c",
        str(REPO / "examples" / "quickstart.yaml"),
        "--json",
        "services.policy.served_model_name=tiny-two",
    )
    assert second.returncode == 0, second.stderr
    records = json.loads(first.stdout), json.loads(second.stdout)
    waiting = gym(two, "status", records[1]["gym_job_id"])
    assert f"queued behind run {records[0]['gym_job_id']}" in waiting.stdout, waiting.stdout
    for home, record, name in ((one, records[0], "tiny-one"), (two, records[1], "tiny-two")):
        watched = gym(home, "status", record["gym_job_id"], "--watch", "--json", "--interval", "1")
        status = json.loads(watched.stdout)
        assert_real_results(record, status)
        job_dir = Path(status["jobs"][0]["job_dir"])
        rows = [json.loads(line) for line in (job_dir / "artifacts" / "rollouts.jsonl").read_text().splitlines()]
        assert {row["response"]["model"] for row in rows} == {name}
        results = gym(home, "results", record["gym_job_id"])
        assert results.returncode == 0 and "answer-judge  succeeded  12/12" in results.stdout, results.stdout


def _clock(log: str, words: str) -> str:
    """The [gym HH:MM:SS] time of the job log's first line holding ``words``."""
    return next(line[5:13] for line in log.splitlines() if line.startswith("[gym ") and words in line)


def test_two_real_quickstarts_on_one_slurm_node_at_once_claim_their_own_ports(
    envs, slurm, tmp_path, mlflow_server, backend_python
) -> None:
    """Two runs of the real quickstart (real vLLM, real gym) placed on the same node at the same
    time, exclusive_nodes left to auto (a job of one node shares it): each claims its server's and
    gym's head server's ports on n1 when it starts, both end 12/12, each driver was answered by its
    own server (the model name it answered with is that run's), and their ports differ. The first
    is also held to everything a Slurm run of the quickstart owes its user (its usage, info,
    results, the next dry run's estimate, an export after the fact): one real start serves both."""
    homes = tmp_path / "one", tmp_path / "two"
    records = []
    for home, name in zip(homes, ("tiny-one", "tiny-two")):
        submitted = gym(
            home,
            "submit",
            "-c",
            str(REPO / "examples" / "quickstart-slurm.yaml"),
            "--json",
            f"services.policy.served_model_name={name}",
            "++compute.main.extra_args.nodelist=n1",
        )
        assert submitted.returncode == 0, submitted.stderr
        records.append(json.loads(submitted.stdout))
    claimed, spans, statuses = [], [], []
    for home, record, name in zip(homes, records, ("tiny-one", "tiny-two")):
        status = json.loads(gym(home, "status", record["gym_job_id"], "--watch", "--json", "--interval", "1").stdout)
        statuses.append(status)
        assert_real_results(record, status)
        [job] = status["jobs"]
        job_dir = Path(job["job_dir"])
        rows = [json.loads(line) for line in (job_dir / "artifacts" / "rollouts.jsonl").read_text().splitlines()]
        assert {row["response"]["model"] for row in rows} == {name}
        log = (job_dir / f"slurm-{job['job_id']}.out").read_text()
        [ports] = [line.split("ports on n1: ", 1)[1] for line in log.splitlines() if "ports on n1: " in line]
        claimed.append(dict(word.split("=") for word in ports.split()))
        spans.append((_clock(log, "ports on n1"), _clock(log, "job finished")))
    assert claimed[0]["policy"] != claimed[1]["policy"], claimed
    assert claimed[0]["gym_head_server"] != claimed[1]["gym_head_server"], claimed
    (start_a, end_a), (start_b, end_b) = spans
    assert start_a < end_b and start_b < end_a, spans  # at the same time on n1
    record, status = records[0], statuses[0]
    assert record["executor"] == "slurm"
    assert_usage_is_the_jobs_own_record(status["jobs"][0], gpus=0)  # the config names no GPUs; no accounting here
    assert_info_says_what_it_ran(homes[0], record)
    assert_results_can_be_trusted_and_compared(homes[0], record)
    assert_the_next_dry_run_is_estimated_from_this_run(homes[0], status, "quickstart-slurm.yaml")
    assert_exported_after_the_fact(homes[0], record, mlflow_server, backend_python)
