"""Warm lanes planned (job.deployment: reload): a checkpoint sweep's runs in step order, dealt into
job.max_concurrent lanes whose first run hosts the one job; the host's policy server guarded; and
each reason a reload cannot be trusted keeping a deployment per run, said in the dry run."""

from __future__ import annotations

import shutil
import subprocess
import warnings
from pathlib import Path

import pytest
import yaml

from nemo_gym.orchestration import contract, library
from nemo_gym.orchestration.plan.lanes import GUARD, weights_key
from nemo_gym.orchestration.reload_guard import TOKEN_ENV

STEPS = (300, 0, 1200, 100, 200)  # out of order on purpose: lanes serve them in step order


@pytest.fixture
def config_file(base, tmp_path: Path) -> Path:
    base["services"]["policy"]["served_model_name"] = "policy"
    base["driver"]["policy_model"] = "policy"
    base["driver"]["benchmarks"] = {"math": {}, "code": {}}
    base["job"] = {"output_path": str(tmp_path / "runs"), "deployment": "reload"}
    path = tmp_path / "eval.yaml"
    path.write_text(yaml.safe_dump(base, sort_keys=False))
    return path


def prepared(config_file: Path, *overrides: str) -> library.Prepared:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return library.prepare(library.compose(config_file, list(overrides), multirun=True))


def checkpoints(*steps: int) -> str:
    return "services.policy.model=" + ",".join(f"/ckpt/step-{s}" for s in steps)


def lanes_of(runs) -> list[list[str]]:
    """Each lane's checkpoints, in the order its job serves them."""
    return [[turn.weights for turn in run.plan.reload.turns] for run in runs if run.plan.reload is not None]


def test_one_lane_serves_every_checkpoint_in_step_order_from_the_first_run_s_job(config_file) -> None:
    runs = prepared(config_file, checkpoints(*STEPS)).runs
    assert lanes_of(runs) == [[f"/ckpt/step-{s}" for s in sorted(STEPS)]]
    [host] = [run.plan for run in runs if run.plan.reload is not None]
    assert host.model == "/ckpt/step-0" and host.submitted_jobs == (host.shared,)
    guests = [run.plan for run in runs if run.plan is not host]
    assert all(g.host == (host.run_id, host.shared.job_dir) and g.submitted_jobs == () for g in guests)
    assert len(host.guests) == 2 * len(guests)  # each guest's two benchmarks


def test_max_concurrent_deals_the_checkpoints_round_robin_into_that_many_lanes(config_file) -> None:
    runs = prepared(config_file, checkpoints(*STEPS), "+job.max_concurrent=2").runs
    assert lanes_of(runs) == [
        ["/ckpt/step-0", "/ckpt/step-200", "/ckpt/step-1200"],
        ["/ckpt/step-100", "/ckpt/step-300"],
    ]
    assert sum(len(run.plan.submitted_jobs) for run in runs) == 2


def test_only_the_host_s_policy_server_opens_its_reload_endpoint_and_only_to_its_token(config_file) -> None:
    runs = prepared(config_file, checkpoints(0, 100)).runs
    host = next(run for run in runs if run.plan.reload is not None)
    [step] = host.plan.shared.steps
    assert step.argv[-2:] == ("--middleware", GUARD)
    env = {var.key: var.value for var in step.env}
    assert env["VLLM_SERVER_DEV_MODE"] == "1"
    assert env[TOKEN_ENV] == f"{host.plan.shared.job_dir}/{contract.RELOAD_TOKEN_FILE}"
    files = host.staged.files
    assert f"{contract.SHARED_DEPLOYMENT_DIR}/{contract.SHIPPED_DIR}/nemo_gym/orchestration/reload_guard.py" in files
    script = files[f"{contract.SHARED_DEPLOYMENT_DIR}/{contract.JOB_SCRIPT}"].content
    # The deployment starts once for the lane, and again only after a reload that broke it.
    start, restart = script.split("gym_restart_deployment() {")
    assert start.count("gym_wait_http policy") == restart.count("gym_wait_http policy") == 1
    assert "GYM_WEIGHTS=( /ckpt/step-0 /ckpt/step-100 )" in script


def test_a_lane_shares_its_node_and_reloads_its_server_on_the_port_it_claimed(config_file) -> None:
    runs = prepared(config_file, checkpoints(0, 100)).runs
    host = next(run for run in runs if run.plan.reload is not None)
    job = host.plan.shared
    assert host.plan.reload.in_place.port == job.steps[0].claimed_port and job.steps[0].claimed_port in job.ports
    assert job.node_sharing.startswith("nodes shared (auto)")
    script = host.staged.files[f"{contract.SHARED_DEPLOYMENT_DIR}/{contract.JOB_SCRIPT}"].content
    assert '--url "http://$(gym_node_name 0):${GYM_PORT_POLICY}"' in script


def test_a_lane_is_told_in_the_dry_run(config_file) -> None:
    notes = prepared(config_file, checkpoints(*STEPS), "+job.max_concurrent=2").notes
    assert any("5 checkpoint run(s) in 2 warm lane(s)" in note for note in notes), notes


UNTRUSTED = [
    ("~services.policy.served_model_name", "served_model_name is not set"),
    ("+services.policy.number_of_instances=2", "not one vLLM server on one node"),
    ("+services.policy.env.PYTHONPATH=lit:/opt/x", "sets PYTHONPATH"),
]


def shared_script(run) -> str:
    return run.staged.files[f"{contract.SHARED_DEPLOYMENT_DIR}/{contract.JOB_SCRIPT}"].content


@pytest.mark.parametrize(("override", "why"), UNTRUSTED)
def test_a_reload_that_cannot_be_trusted_makes_a_restart_lane_and_says_why(config_file, override, why) -> None:
    """One job still serves every checkpoint, each from a deployment of its own run's started in it."""
    prepared_runs = prepared(config_file, checkpoints(0, 100, 200), override)
    assert lanes_of(prepared_runs.runs) == [["/ckpt/step-0", "/ckpt/step-100", "/ckpt/step-200"]]
    [host] = [run for run in prepared_runs.runs if run.plan.reload is not None]
    assert host.plan.reload.in_place is None
    assert any("3 checkpoint run(s) in 1 restart lane(s)" in n and why in n for n in prepared_runs.notes)
    files = host.staged.files
    for turn, weights in ((1, "/ckpt/step-100"), (2, "/ckpt/step-200")):
        [step] = host.plan.reload.turns[turn].steps
        assert step.name == step.launch.step == f"policy.turn{turn}"
        assert step.launch.job_dir == host.plan.shared.job_dir
        # Its own script, serving its own run's checkpoint.
        assert weights in files[f"{contract.SHARED_DEPLOYMENT_DIR}/steps/policy.turn{turn}.sh"].content
    script = shared_script(host)
    assert "gym_start_turn() {" in script and 'gym_switch_turn "${@:2}"' in script
    # Nothing reloads in place: no token, no reload endpoint, no guard.
    assert "--url" not in script and contract.RELOAD_TOKEN_FILE not in script
    assert "gym_restart_deployment" not in script and GUARD not in str(host.plan.shared.steps)


@pytest.mark.parametrize(("override", "why"), UNTRUSTED)
def test_where_services_cannot_start_again_an_untrusted_reload_keeps_a_deployment_per_run(
    config_file, override, why
) -> None:
    config = yaml.safe_load(config_file.read_text())
    config["compute"] = {"k8s": {"type": "kubernetes", "namespace": "ns", "gpus_per_node": 2, "pvc_name": "runs"}}
    config_file.write_text(yaml.safe_dump(config))
    prepared_runs = prepared(config_file, checkpoints(0, 100), override)
    assert lanes_of(prepared_runs.runs) == []
    assert all(run.plan.host is None and run.plan.submitted_jobs for run in prepared_runs.runs)
    assert any(why in n and "cannot start a job's services again" in n for n in prepared_runs.notes)


def test_a_prefill_decode_sweep_is_one_restart_lane_that_restarts_the_whole_pair(config_file) -> None:
    """Its tiers repeat the checkpoint (they inherit the model): still one lane, every step of the
    pair (both tiers and the router) started anew for each turn, on the ports the job claimed."""
    config = yaml.safe_load(config_file.read_text())
    config["services"]["policy"] = {
        "type": "vllm_pd",
        "container": "vllm:latest",
        "model": "/ckpt/step-0",
        "prefill": {"node_pool": "gpu"},
        "decode": {"node_pool": "gpu"},
    }
    config["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "batch", "gpus_per_node": 4}}
    config_file.write_text(yaml.safe_dump(config))
    runs = prepared(config_file, checkpoints(0, 100)).runs
    assert lanes_of(runs) == [["/ckpt/step-0", "/ckpt/step-100"]]
    [host] = [run for run in runs if run.plan.reload is not None]
    job = host.plan.shared
    turn = host.plan.reload.turns[1].steps
    assert [s.name for s in turn] == [f"{s.name}.turn1" for s in job.steps] and len(turn) == 3
    assert [s.claimed_port for s in turn] == [s.claimed_port for s in job.steps]
    script = shared_script(host)
    assert (
        "GYM_SERVICE_STEPS=( [policy-prefill]=policy-prefill.turn1 [policy-decode]=policy-decode.turn1 [policy]=policy.turn1 )"
        in script
    )
    assert subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True).returncode == 0
    if shutil.which("shellcheck"):  # scripts/test installs it; the goldens hold a lane of one turn
        proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, text=True, capture_output=True)
        assert proc.returncode == 0, proc.stdout


def test_runs_whose_servers_differ_beyond_the_checkpoint_go_in_separate_lanes(config_file) -> None:
    runs = prepared(config_file, checkpoints(0, 100), "+services.policy.extra_args=--seed 1,--seed 2").runs
    assert len({weights_key(run.plan) for run in runs}) == 2
    assert sorted(len(lane) for lane in lanes_of(runs)) == [2, 2]


def test_per_benchmark_checkpoint_sweeps_are_told_they_could_reload(config_file) -> None:
    data = yaml.safe_load(config_file.read_text())
    data["job"]["deployment"] = "per_benchmark"
    config_file.write_text(yaml.safe_dump(data))
    assert any("job.deployment=reload" in note for note in prepared(config_file, checkpoints(0, 100)).notes)


def test_a_lane_restarts_its_services_after_a_broken_reload_where_its_backend_can(config_file) -> None:
    """Slurm's job script stops and relaunches its service steps; a Kubernetes pod's services are
    sidecar containers the script cannot start again, so its lane says so and serves no more runs."""
    slurm = prepared(config_file, checkpoints(0, 100)).runs
    [script] = [
        run.staged.files[f"{contract.SHARED_DEPLOYMENT_DIR}/{contract.JOB_SCRIPT}"].content
        for run in slurm
        if run.plan.reload is not None
    ]
    restart = script.split("gym_restart_deployment() {")[1].split("\n}\n")[0]
    assert "gym_stop_steps" in restart and "GYM_STEP_PID[policy]=$!" in restart
    config = yaml.safe_load(config_file.read_text())
    config["compute"] = {"k8s": {"type": "kubernetes", "namespace": "ns", "gpus_per_node": 1, "pvc_name": "runs"}}
    config_file.write_text(yaml.safe_dump(config))
    [run] = [run for run in prepared(config_file, checkpoints(0, 100)).runs if run.plan.reload is not None]
    script = run.staged.files[f"{contract.SHARED_DEPLOYMENT_DIR}/{contract.JOB_SCRIPT}"].content
    restart = script.split("gym_restart_deployment() {")[1].split("\n}\n")[0]
    assert "cannot start a job's services again" in restart and "GYM_STEP_PID" not in restart


def test_a_served_name_that_is_each_checkpoint_s_path_keeps_the_runs_apart(config_file) -> None:
    """Each run serves under its own name, so no server could answer two of them: no lane."""
    runs = prepared(config_file, checkpoints(0, 100), "services.policy.served_model_name=${services.policy.model}").runs
    assert sorted(lanes_of(runs)) == [["/ckpt/step-0"], ["/ckpt/step-100"]]  # a lane of one each
    assert len({weights_key(run.plan) for run in runs}) == 2
