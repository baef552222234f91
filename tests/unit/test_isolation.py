"""One run never answers for another: each vLLM server also serves a run-unique alias that its
health check asks for, a port already held stops the step with the cause named, Slurm jobs of
several nodes take them whole unless told otherwise, local runs take turns machine-wide, and --last is yours.

The bash parts are the rendered library run by bash here against real HTTP servers on loopback."""

from __future__ import annotations

import hashlib
import http.server
import json
import os
import re
import shlex
import socket
import subprocess
import threading
import warnings
from pathlib import Path

import pytest

from nemo_gym.orchestration import contract, record
from nemo_gym.orchestration.api import SubmitConfig
from nemo_gym.orchestration.errors import UserError
from nemo_gym.orchestration.plan.building import build_plan
from nemo_gym.orchestration.plan.services import _with_identity, serving_identity
from nemo_gym.orchestration.render import render_run

RUN_ID = "gym-job-20260101T000000Z-00abcd"


def plan_of(data: dict):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return build_plan(SubmitConfig.model_validate(data), RUN_ID)


# -- the alias ------------------------------------------------------------------------------------


def test_every_job_of_every_run_serves_an_alias_of_its_own(base) -> None:
    base["driver"]["benchmarks"] = {"a": {}, "b": {}}
    a, b = plan_of(base).jobs
    [step_a], [step_b] = a.steps, b.steps
    assert step_a.health.identity == f"{RUN_ID}-a-policy" != step_b.health.identity
    at = step_a.argv.index("--served-model-name")
    assert step_a.argv[at : at + 3] == ("--served-model-name", "Qwen/Qwen3-8B", f"{RUN_ID}-a-policy")


def test_the_configs_extra_args_stay_last_as_written(base) -> None:
    base["services"]["policy"]["extra_args"] = "--seed 1"
    [step] = plan_of(base).jobs[0].steps
    assert step.argv[-2:] == ("--seed", "1")
    assert f"{RUN_ID}-answer-judge-policy" in step.argv[:-2]


def test_the_alias_comes_after_the_names_a_config_serves_so_clients_see_those() -> None:
    argv = ["vllm", "serve", "/m", "--served-model-name", "qwen", "--port", "1"]
    assert _with_identity(argv, "me") == ["vllm", "serve", "/m", "--served-model-name", "qwen", "me", "--port", "1"]
    # in extra_args, last one wins for vLLM's argparse: the alias joins that one
    argv = ["vllm", "serve", "/m", "--served-model-name", "a", "--served-model-name=b"]
    assert _with_identity(argv, "me")[3:5] == ["--served-model-name", "a"]
    assert _with_identity(argv, "me")[-3:] == ["--served-model-name", "b", "me"]


def test_an_alias_holds_only_characters_vllm_and_json_pass_unchanged() -> None:
    assert serving_identity("run", '/runs/run/we ird"name', "pol$icy") == "run-we_ird_name-pol_icy"


def test_a_shared_deployment_serves_one_alias_for_its_one_job(base) -> None:
    base["driver"]["benchmarks"] = {"a": {}, "b": {}}
    base["job"]["deployment"] = "shared"
    plan = plan_of(base)
    assert plan.shared.steps[0].health.identity == f"{RUN_ID}-{contract.SHARED_DEPLOYMENT_DIR}-policy"


# -- whole nodes ------------------------------------------------------------------------------------


def test_slurm_jobs_of_several_nodes_ask_for_their_nodes_whole_by_default(base) -> None:
    base["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "p", "gpus_per_node": 1, "nodes": 2}}
    [directives] = plan_of(base).jobs[0].directives
    assert ("exclusive", None) in directives


def test_exclusive_nodes_false_lets_slurm_pack_jobs(base) -> None:
    base["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "p", "gpus_per_node": 1}}
    base["compute"]["cluster"]["exclusive_nodes"] = False
    [directives] = plan_of(base).jobs[0].directives
    assert all(option != "exclusive" for option, _ in directives)


@pytest.mark.parametrize("option, value", [("exclusive", "user"), ("oversubscribe", "")])
def test_a_config_that_says_how_nodes_are_shared_keeps_its_word(base, option, value) -> None:
    base["compute"]["cluster"]["node_pools"] = {"gpu": {"partition": "p", "gpus_per_node": 1}}
    base["compute"]["cluster"]["extra_args"] = {option: value}
    [directives] = plan_of(base).jobs[0].directives
    assert [d for d in directives if d[0] in ("exclusive", "oversubscribe")] == [(option, value or None)]


def test_each_component_of_a_heterogeneous_job_asks_for_whole_nodes(base) -> None:
    base["compute"]["cluster"]["node_pools"] = {
        "gpu": {"partition": "p", "gpus_per_node": 4},
        "cpu": {"partition": "c", "gpus_per_node": None},
    }
    base["services"]["policy"]["node_pool"] = "gpu"
    components = plan_of(base).jobs[0].directives
    assert len(components) == 2 and all(("exclusive", None) in c for c in components)


# -- the job's own checks, run by bash ----------------------------------------------------------------


class _Models(http.server.BaseHTTPRequestHandler):
    served: list[str] = []
    models_status = 200  # 401: a server run with --api-key

    version: str | None = None  # what GET /version says, as vLLM's server does; None: 404

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        if self.path == "/version":
            body = json.dumps({"version": self.version}).encode()
            self.send_response(200 if self.version is not None else 404)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        body = b"" if self.path == "/health" else json.dumps({"data": [{"id": n} for n in self.served]}).encode()
        self.send_response(200 if self.path == "/health" else self.models_status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def server():
    """A server on a free loopback port, serving the models its test sets."""
    handler = type("Handler", (_Models,), {"served": []})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd, handler
    httpd.shutdown()


def _library(tmp_path: Path, base: dict) -> Path:
    base["job"]["output_path"] = str(tmp_path / "runs")
    plan = plan_of(base)
    staged = render_run(plan)
    lib = tmp_path / "lib.sh"
    lib.write_text(next(f.content for rel, f in staged.files.items() if rel.endswith(contract.LIBRARY_SCRIPT)))
    return lib


def _bash(tmp_path: Path, lib: Path, body: str) -> subprocess.CompletedProcess:
    job = tmp_path / "job"
    state = job / contract.MARKERS_DIR / "j1"
    for sub in (contract.EXITED_DIR, contract.READY_DIR, contract.WHY_DIR):
        (state / sub).mkdir(parents=True, exist_ok=True)
    script = f"set -uo pipefail\nGYM_JOB_DIR={job}\nGYM_JOB_ID=j1\nsource {lib}\n{body}\n"
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)


def _health_check(
    tmp_path: Path, base: dict, port: int, identity: str, timeout: int = 600
) -> subprocess.CompletedProcess:
    return _bash(
        tmp_path,
        _library(tmp_path, base),
        f"declare -A GYM_SERVICE_STEPS=([policy]=policy) GYM_STEP_PID=([policy]=$$)\n"
        f"gym_wait_http policy http://127.0.0.1:{port}/health {timeout} {identity}",
    )


def test_a_server_that_lists_this_jobs_alias_passes_the_health_check(tmp_path, base, server) -> None:
    httpd, handler = server
    handler.served = ["tiny", "my-alias"]
    proc = _health_check(tmp_path, base, httpd.server_address[1], "my-alias")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def provenance_of(tmp_path: Path) -> dict[str, str]:
    from nemo_gym.orchestration.facts import parse_provenance

    path = tmp_path / "job" / contract.PROVENANCE_FILE
    return parse_provenance(path.read_text()) if path.exists() else {}


def test_a_healthy_vllm_server_has_its_version_recorded_as_the_node_saw_it(tmp_path, base, server) -> None:
    httpd, handler = server
    handler.served, handler.version = ["my-alias"], "0.32.0"
    assert _health_check(tmp_path, base, httpd.server_address[1], "my-alias").returncode == 0
    assert provenance_of(tmp_path) == {"vllm_version.policy": "0.32.0"}


def test_a_server_without_a_version_leaves_no_line_and_still_passes(tmp_path, base, server) -> None:
    httpd, handler = server
    handler.served, handler.version = ["my-alias"], None
    assert _health_check(tmp_path, base, httpd.server_address[1], "my-alias").returncode == 0
    assert not (tmp_path / "job" / contract.PROVENANCE_FILE).exists()


def test_what_gym_provenance_records_is_one_printable_line_cut_short(tmp_path, base) -> None:
    lib = _library(tmp_path, base)
    hostile = "NeMo Gym v0.7.0\x1b[31m\nsecond=line\n" + "x" * 500
    proc = _bash(tmp_path, lib, f"gym_provenance gym_version {shlex.quote(hostile)}; gym_provenance empty ''")
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "job" / contract.PROVENANCE_FILE).read_text()
    assert text.count("\n") == 1 and "second" not in text and "\x1b" not in text
    assert provenance_of(tmp_path)["gym_version"].startswith("NeMo Gym v0.7.0[31m")


def test_another_server_on_the_port_fails_the_health_check_at_once_named(tmp_path, base, server) -> None:
    httpd, handler = server
    handler.served = ["tiny", "gym-job-other-run-a-policy"]
    port = httpd.server_address[1]
    proc = _health_check(tmp_path, base, port, "my-alias")  # at once, long before its 600 s are up
    assert proc.returncode == 1
    state = (tmp_path / "job" / contract.MARKERS_DIR / "j1" / contract.STATE_FILE).read_text()
    assert f"127.0.0.1:{port} is answered by another server" in state
    assert "tiny" in state and "another run on this node?" in state


def test_a_model_list_that_cannot_be_read_is_no_proof_of_another_server(tmp_path, base, server) -> None:
    httpd, handler = server
    handler.models_status = 401
    proc = _health_check(tmp_path, base, httpd.server_address[1], "my-alias", timeout=2)
    assert proc.returncode == 1
    state = (tmp_path / "job" / contract.MARKERS_DIR / "j1" / contract.STATE_FILE).read_text()
    assert "answers its health check but lists no models at /v1/models within 2s" in state
    assert "another server" not in state


@pytest.mark.parametrize(
    "change",
    [
        {"extra_args": "--api-key sk-1"},
        {"env": {"VLLM_API_KEY": "host:KEY"}},
        {"health_check": {"port": 9999}},
    ],
)
def test_no_identity_is_asked_where_the_health_check_cannot_ask_it(base, change, monkeypatch) -> None:
    monkeypatch.setenv("KEY", "k")
    base["services"]["policy"].update(change)
    [step] = plan_of(base).jobs[0].steps
    assert step.health.identity is None and "--served-model-name" not in step.argv


def test_what_status_last_observed_is_kept_beside_the_index_not_in_it(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    record.write_local_index(_record(RUN_ID, None))
    record.write_observation(RUN_ID, "2 succeeded, 1 failed")
    assert [r.gym_job_id for r in record.all_records()] == [RUN_ID]
    assert capsys.readouterr().err == ""  # the observation is no index entry to warn about
    assert record.last_observed(RUN_ID)[0] == "2 succeeded, 1 failed"
    assert record.last_observed("gym-job-never-seen") is None


def test_a_port_already_held_when_a_step_starts_is_named_as_such(tmp_path, base) -> None:
    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen()
    port = held.getsockname()[1]
    try:
        proc = _bash(tmp_path, _library(tmp_path, base), f"GYM_STEP_NAME=policy\ngym_port_free {port}")
    finally:
        held.close()
    assert proc.returncode == 1
    why = next((tmp_path / "job" / contract.MARKERS_DIR / "j1" / contract.WHY_DIR).iterdir()).read_text()
    assert f"port {port} on node" in why and "already in use before policy started" in why
    assert _bash(tmp_path, _library(tmp_path, base), f"GYM_STEP_NAME=policy\ngym_port_free {port}").returncode == 0


def test_a_step_that_refused_its_port_is_reported_with_its_reason(tmp_path, base) -> None:
    lib = _library(tmp_path, base)
    state = tmp_path / "job" / contract.MARKERS_DIR / "j1"
    body = (
        "declare -A GYM_SERVICE_STEPS=([policy]=policy) GYM_STEP_PID=([policy]=$$)\n"
        f"echo 1 >{state}/{contract.EXITED_DIR}/policy@n1\n"
        f"echo 'port 8000 on node n1 was already in use before policy started' >{state}/{contract.WHY_DIR}/policy@n1\n"
        "gym_check_alive policy"
    )
    proc = _bash(tmp_path, lib, body)
    assert proc.returncode == 1
    assert (
        "service policy died on node n1 (port 8000 on node n1 was already in use"
        in (state / contract.STATE_FILE).read_text()
    )


# -- --last -------------------------------------------------------------------------------------------


def rid(name: str) -> str:
    """A run id of the one shape ids have, made from a readable name (an id stays itself)."""
    if name.startswith("gym-job-2"):
        return name
    return f"gym-job-20260101T000000Z-{hashlib.sha256(name.encode()).hexdigest()[:6]}"


def _record(name: str, origin: str | None, user: str = "me", at: str = "2026-01-01T00:00:00.000Z"):
    run_id = rid(name)
    return record.SubmissionRecord(
        gym_job_id=run_id,
        submitted_at=at,
        run_dir=f"/r/{run_id}",
        cluster="c",
        executor="local",
        submitted_by=user,
        benchmarks=[],
        submitted_from=origin,
    )


@pytest.fixture
def here(monkeypatch) -> str:
    monkeypatch.setenv("GYM_SESSION", "terminal-1")
    monkeypatch.setattr(record, "current_user", lambda: "me")
    return record.submission_origin()


def test_last_is_the_newest_submission_of_this_shell_session(here) -> None:
    machine = record.machine_of(here)
    records = [_record("mine", here), _record("other-terminal", f"{machine}:terminal-2")]
    assert record.your_last(records).gym_job_id == rid("mine")


def test_outside_a_session_with_submissions_last_is_yours_on_this_machine_and_says_so(here, capsys) -> None:
    machine = record.machine_of(here)
    records = [
        _record("mine-elsewhere", f"{machine}:terminal-9"),
        _record("theirs", f"{machine}:t", user="them"),
        _record("other-machine", "login2:terminal-1"),
    ]
    assert record.your_last(records).gym_job_id == rid("mine-elsewhere")
    assert "your newest submission on" in capsys.readouterr().err


def test_last_is_never_someone_elses(here) -> None:
    with pytest.raises(UserError, match="no submission by me on"):
        record.your_last([_record("theirs", here.replace("terminal-1", "x"), user="them")])


def test_the_session_is_this_terminals_leader_and_its_start_time(monkeypatch) -> None:
    monkeypatch.delenv("GYM_SESSION", raising=False)
    origin = record.submission_origin()
    machine, session = origin.split(":", 1)
    assert machine == socket.gethostname()
    if os.getsid(0) > 0:
        sid, started = session.split(".")
        assert int(sid) == os.getsid(0) and started.isdigit()
    else:  # the leader is outside this PID namespace, as in a container run without a terminal
        assert re.fullmatch(r"ns-\d+", session)


def test_a_session_led_from_outside_the_pid_namespace_is_the_namespace(monkeypatch) -> None:
    monkeypatch.delenv("GYM_SESSION", raising=False)
    monkeypatch.setattr(record.os, "getsid", lambda pid: 0)
    origin = record.submission_origin()
    assert origin == f"{socket.gethostname()}:ns-{os.stat('/proc/self/ns/pid').st_ino}"
    assert origin == record.submission_origin()  # one session for the whole container
