"""The `local` compute type: the same job scripts run on this machine without a scheduler.

The model server and the driver are stand-ins (tests/standins; no GPU here) that record what they
received; the job script, its health checks and its liveness watch are the real ones."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from standin_checkpoints import checkpoint

from nemo_gym.orchestration import contract

STANDINS = Path(__file__).resolve().parents[1] / "standins"
PATH = f"lit:{STANDINS}:/usr/local/bin:/usr/bin:/bin"

pytestmark = pytest.mark.slow


def submit(
    tmp_path: Path,
    services: dict,
    benchmarks: dict | None = None,
    driver_env: dict | None = None,
    expect_rc: int = 0,
    job: dict | None = None,
) -> dict:
    for service in services.values():
        service.setdefault("container", "unused")
        service.setdefault("env", {}).setdefault("PATH", PATH)
    config = {
        "services": services,
        "compute": {"here": {"type": "local"}},
        "driver": {
            "policy_model": next(iter(services)),
            "benchmarks": benchmarks or {"bench": {}},
            "env": {"PATH": PATH, **(driver_env or {})},
        },
        "job": {"output_path": str(tmp_path / "runs"), **(job or {})},
        "otel": {"enabled": False},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    proc = subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "submit", "-c", str(path), "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert proc.returncode == expect_rc, proc.stderr
    return json.loads(proc.stdout)


def wait_state(job: dict, timeout: float = 60) -> dict[str, str]:
    state = Path(job["job_dir"], ".gym", job["job_id"], "state")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if state.exists():
            fields = dict(line.split("=", 1) for line in state.read_text().splitlines() if "=" in line)
            if fields.get("phase") in ("succeeded", "failed"):
                return fields
        time.sleep(0.2)
    raise AssertionError(f"{job['benchmark']} did not finish within {timeout}s")


def job_log(job: dict) -> str:
    return Path(job["job_dir"], f"slurm-{job['job_id']}.out").read_text()


def test_local_run_serves_checks_and_drives_each_benchmark_in_turn(tmp_path) -> None:
    record = submit(
        tmp_path,
        {"policy": {"type": "vllm", "model": "/m/tiny", "served_model_name": "tiny", "port": 18231}},
        benchmarks={"a": {"run": {"limit": 2}}, "b": {}},
    )
    assert record["executor"] == "local"
    for job in record["benchmarks"]:
        assert wait_state(job)["phase"] == "succeeded", job_log(job)
        [driver] = [json.loads(p.read_text()) for p in Path(job["job_dir"], "standin").glob("gym-run-*.json")]
        assert driver["policy_models"]["data"][0]["id"] == "tiny"
        # The port its job claimed when it started: 18231, or the next free one (ports.py).
        [server] = [json.loads(p.read_text()) for p in Path(job["job_dir"], "standin").glob("vllm-*.json")]
        port = int(server["argv"][server["argv"].index("--port") + 1])
        assert 18231 <= port < 20231
        assert driver["overrides"]["policy_base_url"] == f"http://localhost:{port}/v1"
        assert Path(job["job_dir"], "artifacts", "rollouts.jsonl").exists()
        assert Path(job["job_dir"], "logs", f"policy-{job['job_id']}.log").exists()
        assert Path(job["job_dir"], "logs", f"driver-{job['job_id']}.log").exists()
    a, b = record["benchmarks"]
    first_end = Path(a["job_dir"], ".gym", a["job_id"], "state").stat().st_mtime
    [b_vllm] = [json.loads(p.read_text()) for p in Path(b["job_dir"], "standin").glob("vllm-*.json")]
    assert b_vllm["time"] >= first_end - 1  # one after the other: they share the port
    assert Path(record["run_dir"], "gym-job.json").exists()


def test_local_service_failing_at_start_fails_fast(tmp_path) -> None:
    [job] = submit(tmp_path, {"policy": {"type": "vllm", "model": "/FAIL_AT_START", "port": 18232}})["benchmarks"]
    start = time.monotonic()
    state = wait_state(job, timeout=30)
    assert state["phase"] == "failed" and time.monotonic() - start < 15
    assert "service policy died" in state["detail"]
    assert "cannot load model '/FAIL_AT_START'" in job_log(job)


def test_local_service_death_stops_the_driver(tmp_path) -> None:
    services = {
        "policy": {"type": "vllm", "model": "m", "port": 18233, "env": {"PATH": PATH, "STANDIN_DIE_AFTER": "lit:2"}}
    }
    [job] = submit(tmp_path, services, driver_env={"STANDIN_DRIVER_SECONDS": "lit:300"})["benchmarks"]
    start = time.monotonic()
    state = wait_state(job, timeout=60)
    assert state["phase"] == "failed" and time.monotonic() - start < 20
    assert state["detail"].startswith("service policy died on node") and "exit status 7" in state["detail"]
    assert "service policy died on node" in job_log(job) and "(exit status 7)" in job_log(job)
    time.sleep(0.5)
    leftovers = subprocess.run(
        ["pgrep", "-f", "STANDIN_NEVER_MATCHES|standins/gym eval run"], capture_output=True, text=True
    )
    assert leftovers.stdout.strip() == ""  # the driver was stopped, not left running


def test_watch_in_a_terminal_redraws_in_place_and_exits_when_done(tmp_path) -> None:
    record = submit(
        tmp_path,
        {"policy": {"type": "vllm", "model": "m", "port": 18234}},
        driver_env={"STANDIN_DRIVER_SECONDS": "lit:3"},
    )
    cmd = f"{sys.executable} -m nemo_gym.orchestration.cli.main eval status --last --watch --interval 0.5"
    start = time.monotonic()
    proc = subprocess.run(
        ["script", "-qec", cmd, "/dev/null"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "120"},
    )
    assert proc.returncode == 0, proc.stdout
    assert time.monotonic() - start < 30
    screen = proc.stdout
    assert "\x1b[2K\x1b[1A" in screen  # rich's Live: the table is redrawn in place, not appended
    assert "succeeded" in screen and record["gym_job_id"] in screen


def _impostor(port: int) -> subprocess.Popen:
    """Someone else's server answering on ``port`` (with another model's name), once it answers."""
    impostor = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import http.server as h\n"
                "class H(h.BaseHTTPRequestHandler):\n"
                "    def do_GET(self):\n"
                "        self.send_response(200); self.send_header('Content-Type','application/json'); self.end_headers()\n"
                '        self.wfile.write(b\'{"data": [{"id": "impostor"}]}\')\n'
                "    def log_message(self, *a): pass\n"
                f"h.HTTPServer(('0.0.0.0', {port}), H).serve_forever()\n"
            ),
        ]
    )
    deadline = time.monotonic() + 20
    while subprocess.run(["curl", "-sf", "-o", "/dev/null", f"http://127.0.0.1:{port}/"]).returncode != 0:
        if time.monotonic() > deadline:  # a busy machine starts it late
            impostor.kill()
            raise AssertionError("the impostor never answered")
        time.sleep(0.1)
    return impostor


def test_a_port_someone_else_holds_is_passed_over_when_the_job_claims_its_ports(tmp_path) -> None:
    """The configured port is held by another server: the job claims the next free one when it
    starts, and its driver is answered by its own server there, never the impostor."""
    impostor = _impostor(18237)
    try:
        service = {"type": "vllm", "model": "m", "served_model_name": "mine", "port": 18237, "env": {"PATH": PATH}}
        [job] = submit(tmp_path, {"policy": service})["benchmarks"]
        state = wait_state(job, timeout=30)
    finally:
        impostor.kill()
    assert state["phase"] == "succeeded", job_log(job)
    [driver] = [json.loads(p.read_text()) for p in Path(job["job_dir"], "standin").glob("gym-run-*.json")]
    assert driver["policy_models"]["data"][0]["id"] == "mine"
    port = int(driver["overrides"]["policy_base_url"].rsplit(":", 1)[1].split("/")[0])
    assert port != 18237 and f"ports on {os.uname().nodename}: policy={port} " in job_log(job)


def test_another_server_on_a_fixed_port_never_passes_for_the_service(tmp_path) -> None:
    """Someone else answers on the service's port, which the job cannot claim another for (--port
    in its extra_args); our server cannot bind and exits. The job must fail naming the service,
    not report success from talking to the impostor."""
    impostor = _impostor(18235)
    try:
        # Our server binds late (and fails), after the impostor has answered the health check and
        # after the quick driver has finished: only a last look at the services catches it.
        service = {
            "type": "vllm",
            "model": "m",
            "port": 18235,
            "extra_args": "--port 18235",
            "env": {"PATH": PATH, "STANDIN_START_DELAY": "lit:0.6"},
        }
        [job] = submit(tmp_path, {"policy": service})["benchmarks"]
        state = wait_state(job, timeout=30)
    finally:
        impostor.kill()
    assert state["phase"] == "failed", job_log(job)
    # Whichever check sees it first: the step's (the port is held) or the job's (the answer is not its own).
    detail = state["detail"]
    assert re.match(
        r"service policy died on node \S+ \(port 18235 on node \S+ was already in use", detail
    ) or detail.startswith('service policy: localhost:18235 is answered by another server (serving "impostor"'), detail
    assert state["detail"].endswith("another run on this node?") or state["detail"].endswith(
        "another run on this node?)"
    )


def test_shared_deployment_starts_the_model_once_for_every_benchmark(tmp_path) -> None:
    record = submit(
        tmp_path,
        {"policy": {"type": "vllm", "model": "m", "served_model_name": "tiny", "port": 18236}},
        benchmarks={"a": {}, "b": {"run": {"standin_fail": True}}, "c": {}, "d": {}},
        driver_env={"STANDIN_DRIVER_SECONDS": "lit:1"},
        job={"deployment": "shared", "benchmarks_at_once": 2},
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    cli = [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval"]
    assert len({b["job_id"] for b in record["benchmarks"]}) == 1  # one job for all
    watched = subprocess.run(
        [*cli, "status", "--last", "--watch", "--json", "--interval", "0.5"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    states = {j["benchmark"]: j for j in json.loads(watched.stdout)["jobs"]}
    assert {b: j["state"] for b, j in states.items()} == {
        "a": "succeeded",
        "b": "failed",
        "c": "succeeded",
        "d": "succeeded",
    }
    assert states["b"]["detail"] == "driver failed with exit status 5"  # and it did not stop c and d
    shared = Path(record["run_dir"], "shared-deployment")
    assert len(list(shared.glob("standin/vllm-*.json"))) == 1  # the model started once
    for name in "abcd":
        [driver] = [json.loads(p.read_text()) for p in Path(record["run_dir"], name, "standin").glob("gym-run-*.json")]
        assert driver["policy_models"]["data"][0]["id"] == "tiny"
        assert Path(record["run_dir"], name, "logs", f"driver-{record['benchmarks'][0]['job_id']}.log").exists()
    starts = sorted(json.loads(p.read_text())["time"] for p in Path(record["run_dir"]).glob("*/standin/gym-run-*.json"))
    assert starts[1] - starts[0] < 0.9  # two at a time (each driver takes 1 s)
    assert starts[2] - starts[0] >= 0.9  # but not more
    logs = subprocess.run([*cli, "logs", "--last", "a", "--service", "policy"], capture_output=True, text=True, env=env)
    assert "serving tiny" in logs.stdout


def test_a_shared_deployments_service_death_fails_the_running_and_the_queued_benchmarks(tmp_path) -> None:
    services = {
        "policy": {"type": "vllm", "model": "m", "port": 18237, "env": {"PATH": PATH, "STANDIN_DIE_AFTER": "lit:2"}}
    }
    record = submit(
        tmp_path,
        services,
        benchmarks={"a": {}, "b": {}, "c": {}},
        driver_env={"STANDIN_DRIVER_SECONDS": "lit:300"},
        job={"deployment": "shared"},
    )
    start = time.monotonic()
    states = {job["benchmark"]: wait_state(job, timeout=60) for job in record["benchmarks"]}
    assert time.monotonic() - start < 30
    assert {b: (s["phase"], s["detail"]) for b, s in states.items()} == {
        "a": ("failed", "service policy died while the driver ran"),
        "b": ("failed", "service policy died before its turn"),
        "c": ("failed", "service policy died before its turn"),
    }
    shared = Path(record["run_dir"], "shared-deployment")
    # The benchmarks' phases are written before the job itself finishes: wait for its last line.
    deadline = time.monotonic() + 30
    while "job finished with status" not in next(shared.glob("slurm-*.out")).read_text():
        assert time.monotonic() < deadline, "the shared job did not finish within 30 s of its benchmarks"
        time.sleep(0.2)
    [cause] = shared.glob(".gym/*/cause")
    assert cause.read_text() == "service-died\n"
    assert "job finished with status 1: service policy died" in next(shared.glob("slurm-*.out")).read_text()


def test_cancelling_some_benchmarks_of_a_shared_deployment_skips_them_and_the_others_succeed(tmp_path) -> None:
    """gym eval cancel of a running benchmark and a queued one of a shared job: the job goes on, stops
    the first's driver, never starts the second's, runs the third, and ends well."""
    record = submit(
        tmp_path,
        {"policy": {"type": "vllm", "model": "m", "port": 18243}},
        benchmarks={"a": {"run": {"standin_rollouts": 300, "standin_rollout_seconds": 1}}, "b": {}, "c": {}},
        job={"deployment": "shared"},
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    gym = [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval"]
    [job_id] = {b["job_id"] for b in record["benchmarks"]}
    a = Path(record["run_dir"], "a")
    deadline = time.monotonic() + 60
    while not list(a.glob("standin/gym-run-*.json")):  # a's driver runs, b and c wait their turn
        assert time.monotonic() < deadline, "a's driver never started"
        time.sleep(0.2)
    proc = subprocess.run([*gym, "cancel", "--last", "a", "b"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"  cancelled {b} (shared job {job_id} skips it and goes on for the others)" for b in "ab"
    ]
    deadline = time.monotonic() + 60
    while True:
        status = json.loads(subprocess.run([*gym, "status", "--last", "--json"], capture_output=True, env=env).stdout)
        states = {j["benchmark"]: (j["state"], j["detail"]) for j in status["jobs"]}
        if all(state in ("succeeded", "failed", "cancelled") for state, _ in states.values()):
            break
        assert time.monotonic() < deadline, states
        time.sleep(0.5)
    by_user = ("cancelled", "cancelled by the user (gym eval cancel)")
    assert states == {"a": by_user, "b": by_user, "c": ("succeeded", states["c"][1])}
    assert not list(Path(record["run_dir"], "b").glob("standin/gym-run-*.json"))  # never started
    [driver] = [json.loads(p.read_text()) for p in a.glob("standin/gym-run-*.json")]
    with pytest.raises(ProcessLookupError):  # stopped, not left running
        os.kill(driver["pid"], 0)
    shared = Path(record["run_dir"], "shared-deployment")
    deadline = time.monotonic() + 30
    while "job finished with status" not in next(shared.glob("slurm-*.out")).read_text():
        assert time.monotonic() < deadline, "the shared job did not finish"
        time.sleep(0.2)
    log = next(shared.glob("slurm-*.out")).read_text()
    assert "stopping the driver of a: cancelled (gym eval cancel)" in log
    assert "job finished with status 0: every benchmark finished but 2 cancelled (gym eval cancel)" in log, log
    results = subprocess.run([*gym, "results", "--last"], capture_output=True, text=True, env=env)
    rows = {line.split()[0]: line.split()[1] for line in results.stdout.splitlines()[3:6]}
    assert rows == {"a": "cancelled", "b": "cancelled", "c": "succeeded"}, results.stdout
    for name, phase in (("a", "cancelled while its driver ran"), ("b", "cancelled before its turn")):
        assert f"detail={phase}" in Path(record["run_dir"], name, ".gym", job_id, "state").read_text()


def test_a_cancelled_driver_that_ignores_its_term_is_killed_and_the_job_goes_on(tmp_path) -> None:
    record = submit(
        tmp_path,
        {"policy": {"type": "vllm", "model": "m", "port": 18244}},
        benchmarks={"a": {"run": {"standin_rollouts": 300, "standin_rollout_seconds": 1, "standin_ignore_term": True}}, "b": {}},
        job={"deployment": "shared"},
    )  # fmt: skip
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    gym = [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval"]
    a, b = (job for job in record["benchmarks"])
    deadline = time.monotonic() + 60
    while not list(Path(a["job_dir"]).glob("standin/gym-run-*.json")):
        assert time.monotonic() < deadline, "a's driver never started"
        time.sleep(0.2)
    time.sleep(0.5)  # its TERM handler set
    proc = subprocess.run([*gym, "cancel", "--last", "a"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    cancelled = time.monotonic()
    assert wait_state(b, timeout=60)["phase"] == "succeeded", job_log(b)
    assert time.monotonic() - cancelled >= 14  # b waited for a's driver: TERM, then KILL 15 s later
    state = Path(a["job_dir"], ".gym", a["job_id"], "state").read_text()
    assert "phase=cancelled" in state and "detail=cancelled while its driver ran" in state
    [driver] = [json.loads(p.read_text()) for p in Path(a["job_dir"]).glob("standin/gym-run-*.json")]
    with pytest.raises(ProcessLookupError):
        os.kill(driver["pid"], 0)


def test_command_benchmarks_in_a_shared_local_deployment_report_their_own_exit(tmp_path) -> None:
    """A command runs instead of gym eval run: told its directory and the policy, its exit status is
    its benchmark's state; beside a failing command and a gym one, on one shared deployment."""
    record = submit(
        tmp_path,
        {"policy": {"type": "vllm", "model": "/m/tiny", "served_model_name": "tiny", "port": 18236}},
        benchmarks={
            "asks": {
                "command": 'curl -sf "$NEMO_GYM_POLICY_BASE_URL/models" > "$NEMO_GYM_BENCH_DIR/artifacts/models.json"\n'
                'echo "done by $NEMO_GYM_POLICY_MODEL_NAME"'
            },
            "fails": {"command": "echo 'about to fail' >&2\nexit 4"},
            "gym": {},
        },
        job={"deployment": "shared"},
    )
    jobs = {b["benchmark"]: b for b in record["benchmarks"]}
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    cli = [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval"]
    deadline = time.monotonic() + 90
    while True:
        status = json.loads(
            subprocess.run([*cli, "status", "--last", "--json"], capture_output=True, text=True, env=env).stdout
        )
        states = {j["benchmark"]: j for j in status["jobs"]}
        if (
            all(j["state"] not in ("queued", "starting", "running") for j in states.values())
            or time.monotonic() > deadline
        ):
            break
        time.sleep(0.5)
    assert states["asks"]["state"] == "succeeded" and states["gym"]["state"] == "succeeded", states
    assert states["fails"]["state"] == "failed" and "exit status 4" in states["fails"]["detail"], states
    models = json.loads(Path(jobs["asks"]["job_dir"], "artifacts", "models.json").read_text())
    assert models["data"][0]["id"] == "tiny"
    logs = subprocess.run([*cli, "logs", "--last", "fails", "--driver"], capture_output=True, text=True, env=env)
    assert "about to fail" in logs.stdout, logs.stderr
    asked = subprocess.run([*cli, "logs", "--last", "asks", "--driver"], capture_output=True, text=True, env=env)
    assert "done by tiny" in asked.stdout


def submit_local_sweep(tmp_path: Path, accuracies: dict[int, float], port: int, driver_seconds: int):
    """``gym eval submit -m`` of stand-in checkpoints on this machine; (the sweep's JSON, the models,
    a function running ``gym eval ARGS`` with the same index)."""
    models = []
    for step, accuracy in accuracies.items():
        model = tmp_path / "ckpt" / f"step-{step}"
        model.mkdir(parents=True)
        (model / "standin-accuracy").write_text(f"{accuracy}\n")
        models.append(str(model))
    config = {
        "services": {
            "policy": {
                "type": "vllm",
                "model": "/placeholder",
                "container": "unused",
                "port": port,
                "env": {"PATH": PATH},
            }
        },
        "compute": {"here": {"type": "local"}},
        "driver": {
            "policy_model": "policy",
            "benchmarks": {"math": {"run": {"standin_rollouts": 4}}},
            "env": {"PATH": PATH, "STANDIN_DRIVER_SECONDS": f"lit:{driver_seconds}"},
        },
        "job": {"output_path": str(tmp_path / "runs")},
        "otel": {"enabled": False},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}

    def gym(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )

    proc = gym("submit", "-c", str(path), "-m", f"services.policy.model={','.join(models)}", "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), models, gym


def test_a_local_sweep_runs_its_runs_one_after_another(tmp_path) -> None:
    """Two checkpoints on this machine: the second run waits (queued, named so) while the first
    holds the model's port, then runs; the sweep's results are each checkpoint's."""
    sweep, models, gym = submit_local_sweep(tmp_path, {1000: 0.25, 2000: 0.75}, 18237, driver_seconds=2)
    first, second = (r["benchmarks"][0] for r in sweep["records"])
    status = json.loads(gym("status", sweep["sweep_id"], "--json").stdout)
    [waiting] = status["runs"][1]["jobs"]
    assert (waiting["state"], waiting["detail"]) == ("queued", "waiting for the runs before it")
    assert wait_state(first)["phase"] == "succeeded", job_log(first)
    assert wait_state(second)["phase"] == "succeeded", job_log(second)
    first_end = Path(first["job_dir"], ".gym", first["job_id"], "state").stat().st_mtime
    [second_vllm] = [json.loads(p.read_text()) for p in Path(second["job_dir"], "standin").glob("vllm-*.json")]
    assert second_vllm["time"] >= first_end - 1  # one after the other: they share the port
    proc = gym("results", "--last")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split()[:2] for line in proc.stdout.splitlines()[3:5]]
    assert rows == [[models[0], "0.2500"], [models[1], "0.7500"]]


def test_cancel_of_a_local_sweep_stops_the_running_run_and_the_waiting_one_never_starts(tmp_path) -> None:
    sweep, models, gym = submit_local_sweep(tmp_path, {1000: 0.25, 2000: 0.75}, 18238, driver_seconds=300)
    first, second = (r["benchmarks"][0] for r in sweep["records"])
    deadline = time.monotonic() + 30
    while json.loads(gym("status", "--last", "--json").stdout)["runs"][0]["jobs"][0]["state"] != "running":
        assert time.monotonic() < deadline, "the first run never got to its driver"
        time.sleep(0.3)
    proc = gym("cancel", "--last")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"  {models[0]}: cancelled math ({'job ' + first['job_id']})",
        f"  {models[1]}: cancelled math ({'job ' + second['job_id']})",
    ]
    deadline = time.monotonic() + 30
    while True:
        states = [run["jobs"][0]["state"] for run in json.loads(gym("status", "--last", "--json").stdout)["runs"]]
        if states == ["cancelled", "cancelled"]:
            break
        assert time.monotonic() < deadline, states
        time.sleep(0.3)
    time.sleep(1)
    assert not list(Path(second["job_dir"]).glob("standin/vllm-*.json"))  # the waiting run never started its model
    # A cancelled local job leaves its driver step running (a fault of the local job's TERM
    # handling, not of sweeps): stop it here, so it holds nothing of the tests after this one.
    for driver in Path(first["job_dir"]).glob("standin/gym-run-*.json"):
        try:
            os.killpg(os.getpgid(json.loads(driver.read_text())["pid"]), signal.SIGTERM)
        except ProcessLookupError:
            pass


def test_two_runs_submitted_one_after_the_other_take_turns_and_each_is_answered_by_its_own_server(tmp_path) -> None:
    """Two checkpoints submitted a second apart on one port, as users do: the second waits, named
    queued behind the first, and each run's driver is answered by its own run's server only."""
    (tmp_path / "one").mkdir()
    (tmp_path / "two").mkdir()
    service = {"type": "vllm", "model": "/m/same", "port": 18241}
    first = submit(
        tmp_path / "one",
        {"policy": {**service, "served_model_name": "one"}},
        driver_env={"STANDIN_DRIVER_SECONDS": "lit:3"},
    )["benchmarks"][0]
    time.sleep(1)
    second_record = submit(tmp_path / "two", {"policy": {**service, "served_model_name": "two", "env": {"PATH": PATH}}})
    second = second_record["benchmarks"][0]
    state = Path(second["job_dir"], ".gym", second["job_id"], "state")
    deadline = time.monotonic() + 20
    while "queued behind run" not in (state.read_text() if state.exists() else ""):
        assert time.monotonic() < deadline, state.read_text() if state.exists() else "no state"
        time.sleep(0.2)
    first_run = Path(first["job_dir"]).parent.name
    assert f"queued behind run {first_run} (local runs take turns on this machine)" in state.read_text()
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "two" / "cache")}
    shown = subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "status", "--last"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert f"queued behind run {first_run}" in shown.stdout, shown.stdout + shown.stderr
    for job, name in ((first, "one"), (second, "two")):
        assert wait_state(job, timeout=90)["phase"] == "succeeded", job_log(job)
        [driver] = [json.loads(p.read_text()) for p in Path(job["job_dir"], "standin").glob("gym-run-*.json")]
        # The server it talked to serves its name and its own job's alias: its run's server.
        run_id = Path(job["job_dir"]).parent.name
        served = [m["id"] for m in driver["policy_models"]["data"]]
        assert served == [name, f"{run_id}-bench-policy"]


def submit_lane(tmp_path: Path, models: list[str], **policy: str) -> subprocess.CompletedProcess:
    """`gym eval submit --json` of a checkpoint sweep (job.deployment: reload) of the stand-in
    vLLM on this machine, the policy's settings given."""
    service = {"type": "vllm", "model": "/p", "container": "unused", "env": {"PATH": PATH}, **policy}
    path = tmp_path / "config.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "services": {"policy": service},
                "compute": {"here": {"type": "local"}},
                "driver": {"policy_model": "policy", "benchmarks": {"math": {}}, "env": {"PATH": PATH}},
                "job": {"output_path": str(tmp_path / "runs"), "deployment": "reload"},
                "otel": {"enabled": False},
            }
        )
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    cli = [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval"]
    return subprocess.run(
        [*cli, "submit", "-c", str(path), "-m", "services.policy.model=" + ",".join(models), "--json"],
        capture_output=True, text=True, env=env,
    )  # fmt: skip


def test_a_local_lane_whose_reload_breaks_the_server_starts_it_again_and_goes_on(tmp_path) -> None:
    """A warm lane of three checkpoints on this machine, the middle one failing the reload
    half-way (the stand-in then holds weights nobody can name): that run fails, named; the lane's
    server is stopped and started again on the same port, and the last run is answered by its own
    weights."""
    models = [checkpoint(tmp_path / "ckpt", step, step / 1000) for step in (100, 200, 300)]
    (Path(models[1]) / "standin-corrupt").write_text("")
    proc = submit_lane(tmp_path, models, served_model_name="policy")
    assert proc.returncode == 0, proc.stderr
    jobs = [r["benchmarks"][0] for r in json.loads(proc.stdout)["records"]]
    assert [wait_state(job, 120)["phase"] for job in jobs] == ["succeeded", "failed", "succeeded"]
    assert "weights were not loaded" in wait_state(jobs[1])["detail"]
    lane = Path(jobs[0]["job_dir"]).parent / "shared-deployment"
    starts = [json.loads(p.read_text()) for p in lane.glob("standin/vllm-*.json")]
    assert len(starts) == 2 and len({s["argv"][s["argv"].index("--port") + 1] for s in starts}) == 1, starts
    [driver] = [json.loads(p.read_text()) for p in Path(jobs[2]["job_dir"], "standin").glob("gym-run-*.json")]
    assert driver["policy_models"]["data"][0]["standin_weights"] == models[2]
    assert (
        "starting the deployment again for the runs after it (1 of 2)"
        in Path(lane, f"slurm-{jobs[0]['job_id']}.out").read_text()
    )


def test_a_local_restart_lane_starts_each_checkpoint_s_server_in_one_job_and_a_failed_start_fails_alone(
    tmp_path,
) -> None:
    """No served_model_name, so the weights cannot be switched in place: a restart lane. One job
    serves the three checkpoints, each from a server started on its own checkpoint on the job's one
    claimed port; the middle checkpoint's server does not start (its run fails, named) and the
    last run is still served, by its own weights."""
    models = [
        checkpoint(tmp_path / "ckpt", 100, 0.1),
        checkpoint(tmp_path / "FAIL_AT_START", 200, 0.2),
        checkpoint(tmp_path / "ckpt", 300, 0.3),
    ]
    proc = submit_lane(tmp_path, models)
    assert proc.returncode == 0, proc.stderr
    assert "3 checkpoint run(s) in 1 restart lane(s)" in proc.stderr, proc.stderr
    sweep = json.loads(proc.stdout)
    jobs = [r["benchmarks"][0] for r in sweep["records"]]
    assert len({job["job_id"] for job in jobs}) == 1  # one job serves the lane
    assert [wait_state(job, 120)["phase"] for job in jobs] == ["succeeded", "failed", "succeeded"]
    assert "deployment did not start" in wait_state(jobs[1])["detail"]
    lane = Path(jobs[0]["job_dir"]).parent / "shared-deployment"
    starts = [json.loads(p.read_text()) for p in lane.glob("standin/vllm-*.json")]
    assert sorted(s["argv"][1] for s in starts) == sorted(models), starts  # each started on its own checkpoint
    assert len({s["argv"][s["argv"].index("--port") + 1] for s in starts}) == 1, starts
    for job, model in ((jobs[0], models[0]), (jobs[2], models[2])):
        [driver] = [json.loads(p.read_text()) for p in Path(job["job_dir"], "standin").glob("gym-run-*.json")]
        assert [m["standin_weights"] for m in driver["policy_models"]["data"]] == [model, model]
        provenance = Path(job["job_dir"], contract.PROVENANCE_FILE).read_text()
        assert f"weights={model}\n" in provenance and "weights.how=started\n" in provenance
    # Resubmit says plainly that it cannot queue a lane's run again (not that it would serve it).
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    resubmit = subprocess.run(
        [sys.executable, "-m", "nemo_gym.orchestration.cli.main", "eval", "resubmit", sweep["records"][1]["gym_job_id"]],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    assert resubmit.returncode == 1 and "share one deployment (one job)" in resubmit.stdout, resubmit.stdout
    # Each turn's server has a log of its own.
    assert sorted(p.name.split("-")[0] for p in (lane / "logs").glob("policy*.log")) == [
        "policy",
        "policy.turn1",
        "policy.turn2",
    ]
