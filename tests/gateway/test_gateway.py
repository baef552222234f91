"""The Ray gateway for real: a local Ray head (4 CPUs, 4 logical GPUs), the gateway in front of two
stand-in vLLM replicas that join the cluster and take over the GPUs reserved for them.

Needs a Python with `ray` and `aiohttp`, named by GYM_RAY_PYTHON (scripts/envs/ray-env.sh builds
one); skipped otherwise. Every process started here is ended by its id in the fixtures.
"""

from __future__ import annotations

import contextlib
import glob
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from nemo_gym.orchestration import shipping

REPO = Path(__file__).resolve().parents[2]
STREAMING_VLLM = Path(__file__).resolve().parent / "streaming_vllm"
STOCK_VLLM = REPO / "tests" / "standins" / "vllm"
LONG_REQUEST_SECONDS = 60

pytestmark = pytest.mark.slow


def _unavailable(reason: str) -> None:
    # Under scripts/test (and CI) the environment is built first: missing it is a failure.
    if os.environ.get("GYM_REQUIRE_CLUSTER") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def _ray_python() -> str:
    python = os.environ.get("GYM_RAY_PYTHON", "")
    if not python:
        _unavailable(
            "GYM_RAY_PYTHON is not set: no Python with ray and aiohttp to run the gateway (scripts/envs/ray-env.sh)"
        )
    probe = subprocess.run([python, "-c", "import ray, aiohttp"], capture_output=True, text=True)
    if probe.returncode != 0:
        _unavailable(f"`ray`/`aiohttp` not importable by GYM_RAY_PYTHON={python}: {probe.stderr.strip()[-200:]}")
    return python


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop_group(proc: subprocess.Popen, timeout: float = 15) -> None:
    """End a process we started in its own session, and its process group."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(10)


def _pids_mentioning(text: str) -> list[int]:
    pids = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            if text in Path(cmdline).read_bytes().decode(errors="replace"):
                pids.append(int(cmdline.split("/")[2]))
        except OSError:
            continue
    return [p for p in pids if p != os.getpid()]


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.split("/")[2]))
    out, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[-1].split()[0] != "Z"
    except OSError:
        return False


def _parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as fh:
        return int(fh.read().split(") ")[-1].split()[1])


def _stage_gateway(job_dir: str) -> list[str]:
    """The gateway's program staged into the job directory as a job ships it; its launch words."""
    for rel, text in shipping.staged(shipping.Program.GATEWAY).items():
        (Path(job_dir) / rel).parent.mkdir(parents=True, exist_ok=True)
        (Path(job_dir) / rel).write_text(text)
    return shipping.launch_words(shipping.Program.GATEWAY, tree=job_dir, isolated=False).split()[1:]


@pytest.fixture(scope="module")
def ray_head():
    """A Ray head with its own temp dir, token auth (as a job sets it up), 4 logical GPUs and its
    dashboard (which `serve status` asks)."""
    python = _ray_python()
    ray = str(Path(python).parent / "ray")
    tmp = tempfile.mkdtemp(prefix="gw-", dir="/tmp")  # short: Ray's socket paths live under it
    token = Path(tmp) / "auth_token"
    token.write_text(os.urandom(24).hex())
    token.chmod(0o600)
    port, dashboard, metrics = _free_port(), _free_port(), _free_port()
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN_PATH": str(token),
        "RAY_USAGE_STATS_ENABLED": "0",
        "GYM_JOB_DIR": tmp,
        "STANDIN_RAY_GPUS": "2",
        "PATH": f"{Path(python).parent}:{os.environ['PATH']}",
    }
    log = open(Path(tmp) / "ray-head.log", "w")  # noqa: SIM115 - Ray writes it while the test runs
    head = subprocess.Popen(
        [
            ray,
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--num-cpus=4",
            "--num-gpus=4",
            "--include-dashboard=true",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard}",
            f"--dashboard-agent-listen-port={_free_port()}",
            f"--ray-client-server-port={_free_port()}",
            f"--metrics-export-port={metrics}",  # as the gateway's step starts its Ray (step.sh)
            f"--temp-dir={tmp}/ray",
            "--disable-usage-stats",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        cwd=tmp,
    )
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while subprocess.run([ray, "status", f"--address={address}"], env=env, capture_output=True).returncode:
            assert head.poll() is None, Path(tmp, "ray-head.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the Ray head did not come up in 90 s"
            time.sleep(1)
        yield {
            "python": python,
            "address": address,
            "dashboard": f"http://127.0.0.1:{dashboard}",
            "metrics": f"http://127.0.0.1:{metrics}/metrics",
            "env": env,
            "dir": Path(tmp),
            "gateway": _stage_gateway(tmp),
        }
    finally:
        started = _descendants(head.pid)  # Ray workers run in sessions of their own
        _stop_group(head, timeout=5)
        for pid in set(started + _pids_mentioning(tmp)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


class Gateway:
    """One gateway on the head's cluster (Serve has one HTTP proxy a cluster: one gateway at a time)."""

    def __init__(self, head: dict, vllm: list[str], *options: str, instances: int = 2) -> None:
        self.port = _free_port()
        self.dir = head["dir"]
        self.log_path = self.dir / f"gateway-{self.port}.log"
        self.log_dir = self.dir / f"logs-{self.port}"
        self.why = self.dir / f"why-{self.port}"
        self.log = open(self.log_path, "w")  # noqa: SIM115 - the gateway writes it for its life
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [
                head["python"],
                *head["gateway"],
                "--address",
                head["address"],
                "--port",
                str(self.port),
                "--instances",
                str(instances),
                "--log-dir",
                str(self.log_dir),
                "--why-file",
                str(self.why),
                "--poll-interval",
                "1",
                *options,
                "--",
                *vllm,
            ],
            env=head["env"],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=self.dir,
        )

    def text(self) -> str:
        return self.log_path.read_text()

    def status(self) -> dict:
        try:
            return json.loads((self.log_dir / "status.json").read_text())
        except (OSError, ValueError):
            return {}

    def health(self) -> int:
        try:
            return self.get("/health")[0]
        except OSError:
            return 0

    def get(self, path: str) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def post(self, path: str, body: dict, timeout: float | None = 30) -> tuple[int, dict, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
            resp = conn.getresponse()
            return resp.status, dict(resp.getheaders()), resp.read()
        finally:
            conn.close()

    def ask(self) -> str | None:
        """One chat request: the replica that answered it, or None when it failed."""
        try:
            status, headers, body = self.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})
        except OSError:
            return None
        ok = status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "42"
        return headers.get("x-gateway-replica") if ok else None

    def wait_ready(self, timeout: float = 120) -> float:
        deadline = time.monotonic() + timeout
        while self.status().get("state") != "ready" or self.health() != 200:
            assert self.proc.poll() is None, f"gateway exited {self.proc.returncode}:\n{self.text()[-4000:]}"
            assert time.monotonic() < deadline, f"gateway not ready in {timeout} s:\n{self.text()[-4000:]}"
            time.sleep(0.5)
        return time.monotonic() - self.started

    def stop(self) -> None:
        _stop_group(self.proc, timeout=60)
        self.log.close()


def _engines(head: dict) -> list[dict]:
    """Every streaming stand-in engine started on this head so far, oldest first."""
    records = [json.loads(Path(p).read_text()) for p in glob.glob(str(head["dir"] / "standin" / "vllm-*.json"))]
    return sorted(records, key=lambda r: r.get("time", 0))


def _kill_engines(records: list[dict]) -> None:
    for record in records:
        if _alive(record["pid"]):
            os.kill(record["pid"], signal.SIGKILL)


@pytest.fixture(scope="class")
def gateway(ray_head):
    """Two streaming stand-in replicas with 2 GPUs each (their own placement groups), behind one gateway."""
    model = ray_head["dir"] / "tiny-model"
    model.mkdir(exist_ok=True)
    gw = Gateway(
        ray_head,
        [ray_head["python"], str(STREAMING_VLLM), "serve", str(model), "--served-model-name", "tiny"],
        "--gpus-per-instance",
        "2",
        "--recovery-timeout",
        "20",
    )
    try:
        gw.ready_seconds = gw.wait_ready()
        gw.records = [r for r in _engines(ray_head) if r.get("ray_pg")]  # this gateway's engines (the only ones so far)
        gw.model = model
        yield gw
    finally:
        gw.stop()
        _kill_engines(_engines(ray_head))


class TestTwoReplicas:
    def test_replicas_start_on_the_ray_cluster(self, gateway, ray_head):
        assert gateway.ready_seconds < 60
        print(f"gateway ready {gateway.ready_seconds:.1f} s after it started")
        assert len(gateway.records) == 2, gateway.text()
        ports = set()
        for record in gateway.records:
            argv = record["argv"]
            assert argv[:2] == ["serve", str(gateway.model)]
            assert argv[argv.index("--distributed-executor-backend") + 1] == "ray"
            ports.add(argv[argv.index("--port") + 1])
            assert record["env"]["RAY_ADDRESS"] == ray_head["address"]
            # Its "Ray workers" joined the same cluster and got GPUs of a placement group of its
            # own on its replica's node: no nested group, nothing held twice.
            assert record["ray_gcs"].endswith(":" + ray_head["address"].split(":")[1])
            assert record["ray_worker_node"] == record["ray_node"]
        assert len(ports) == 2
        assert gateway.health() == 200
        assert gateway.status()["running"] == 2

    def test_serve_status_shows_the_application(self, gateway, ray_head):
        serve = str(Path(ray_head["python"]).parent / "serve")
        out = subprocess.run(
            [serve, "status", "--address", ray_head["dashboard"]],
            env=ray_head["env"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        print(out.stdout)
        assert "gym-gateway:" in out.stdout and "status: RUNNING" in out.stdout
        assert "RUNNING: 2" in out.stdout

    def test_ray_exports_serve_s_metrics_where_the_collector_scrapes(self, gateway, ray_head):
        """The port the collector scrapes on each node (``--metrics-export-port``) carries Ray
        Serve's own metrics for the application, once it has served (Ray exports them every few s)."""
        for _ in range(5):
            assert gateway.ask() is not None
        deadline, text = time.monotonic() + 90, ""
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):
                text = urllib.request.urlopen(ray_head["metrics"], timeout=10).read().decode()
            if "ray_serve_deployment_request_counter" in text and 'application="gym-gateway"' in text:
                return
            time.sleep(3)
        served = sorted({line.split("{")[0] for line in text.splitlines() if line.startswith("ray_serve")})
        raise AssertionError(f"no request counter of gym-gateway's in Ray's metrics; ray_serve metrics: {served}")

    def test_requests_are_spread_over_both_replicas(self, gateway):
        seen = [gateway.ask() for _ in range(20)]
        assert None not in seen, seen
        assert len(set(seen)) == 2, seen
        print(f"20 requests: {sorted(seen.count(r) for r in set(seen))} per replica")

    def test_streamed_response_arrives_chunk_by_chunk(self, gateway):
        body = json.dumps({"stream": True, "standin_chunks": 6, "standin_delay": 1.0}).encode()
        with socket.create_connection(("127.0.0.1", gateway.port), timeout=60) as sock:
            sent = time.monotonic()
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            buffer, arrivals = b"", []
            while chunk := sock.recv(65536):
                now = time.monotonic() - sent
                arrivals += [now] * chunk.count(b"data: ")
                buffer += chunk
        head, _, rest = buffer.partition(b"\r\n\r\n")
        assert b" 200 " in head.split(b"\r\n")[0] and b"text/event-stream" in head.lower()
        assert rest.count(b"data: {") == 6 and b"data: [DONE]" in rest
        assert len(arrivals) == 7
        print(f"SSE event arrivals (s after the request): {[round(a, 2) for a in arrivals]}")
        # Five 1-s gaps on the engine: a buffering proxy would deliver everything at once after ~5 s.
        assert arrivals[0] < 1.5, arrivals
        assert arrivals[-1] - arrivals[0] > 4.0, arrivals

    def test_hop_by_hop_headers_are_dropped_both_ways(self, gateway):
        conn = http.client.HTTPConnection("127.0.0.1", gateway.port, timeout=30)
        hop = {
            "Connection": "keep-alive, X-Hop-Req",
            "X-Hop-Req": "1",
            "Keep-Alive": "timeout=5",
            "TE": "trailers",
            "Proxy-Authorization": "Basic eDp5",
            "Proxy-Connection": "keep-alive",
            "Trailer": "X-Sum",
            "Upgrade": "websocket",
            "X-End-To-End": "kept",
        }
        # A chunked request body: it must reach the engine whole, not with Transfer-Encoding re-framed.
        conn.request("POST", "/standin/echo", body=iter([b"abc", b"defg"]), headers=hop, encode_chunked=True)
        resp = conn.getresponse()
        echoed = json.loads(resp.read())
        conn.close()
        received = {k.lower(): v for k, v in echoed["headers"]}
        for name in (
            "connection",
            "x-hop-req",
            "keep-alive",
            "te",
            "proxy-authorization",
            "proxy-connection",
            "trailer",
            "transfer-encoding",
            "upgrade",
        ):
            assert name not in received, (name, received)
        assert received["x-end-to-end"] == "kept"
        assert echoed["body_length"] == 7 and received["content-length"] == "7"
        # Nothing the client did not send (http.client sends Accept-Encoding: identity, no Accept).
        assert received["accept-encoding"] == "identity" and "accept" not in received
        got = [k.lower() for k, _ in resp.getheaders()]
        for name in ("x-hop", "keep-alive", "proxy-authenticate", "upgrade"):
            assert name not in got, (name, resp.getheaders())
        assert "x-standin-port" in got and got.count("server") == 1 and got.count("date") == 1

    def test_long_request_is_not_cut_and_others_are_answered(self, gateway):
        result: dict = {}

        def long_request() -> None:
            started = time.monotonic()
            result["response"] = gateway.post("/v1/chat/completions", {"standin_sleep": LONG_REQUEST_SECONDS}, None)
            result["seconds"] = time.monotonic() - started

        thread = threading.Thread(target=long_request)
        thread.start()
        time.sleep(1)
        quick = [gateway.ask() for _ in range(8)]
        thread.join(LONG_REQUEST_SECONDS + 60)
        assert not thread.is_alive()
        status, headers, body = result["response"]
        assert status == 200 and json.loads(body)["choices"][0]["message"]["content"] == "42"
        assert result["seconds"] >= LONG_REQUEST_SECONDS
        assert None not in quick, quick
        # Serve routes by queue length: the busy replica gets few of the quick ones, if any.
        busy = headers["x-gateway-replica"]
        print(f"quick requests while {busy} was busy: {quick}")
        assert quick.count(busy) <= 2, quick

    def test_a_killed_engine_is_replaced_while_the_other_serves(self, gateway, ray_head):
        victim, survivor = gateway.records
        before = {r["pid"] for r in _engines(ray_head)}
        os.kill(victim["pid"], signal.SIGKILL)
        killed = time.monotonic()
        answered, failed, replaced = 0, 0, None
        while time.monotonic() - killed < 90:
            if gateway.ask() is None:
                failed += 1
            else:
                answered += 1
            new = [r for r in _engines(ray_head) if r["pid"] not in before]
            if replaced is None and new and gateway.status().get("state") == "ready":
                replaced = time.monotonic() - killed
            if replaced is not None and answered >= 40:
                break
            time.sleep(0.1)
        print(
            f"engine killed: replaced (new engine healthy, all replicas running) after {replaced} s; "
            f"{answered} requests answered, {failed} failed meanwhile"
        )
        assert replaced is not None, gateway.text()[-4000:]
        assert gateway.proc.poll() is None, gateway.text()[-4000:]
        assert _alive(survivor["pid"]), "the other replica's engine did not keep serving"
        [new] = [r for r in _engines(ray_head) if r["pid"] not in before]
        assert _alive(new["pid"]) and new["ray_worker_node"] == new["ray_node"]
        # Only what reached the dead replica before its end was seen: a few, not the survivor's share.
        assert failed <= 5, (answered, failed)
        after = [gateway.ask() for _ in range(20)]
        assert None not in after and len(set(after)) == 2, after
        assert gateway.status()["recoveries_s"], gateway.status()
        assert "recovered in" in gateway.text()

    def test_an_engine_that_cannot_start_again_fails_the_gateway_after_the_bound(self, gateway, ray_head):
        """Last of the class: it ends the class's gateway."""
        (gateway.model / "standin-fail-start").write_text("")
        victim = next(r for r in _engines(ray_head) if _alive(r["pid"]) and r["argv"][1] == str(gateway.model))
        os.kill(victim["pid"], signal.SIGKILL)
        killed = time.monotonic()
        rc = gateway.proc.wait(180)
        took = time.monotonic() - killed
        print(f"replacement never starts: gateway exit {rc} {took:.1f} s after the engine was killed")
        assert rc == 3, gateway.text()[-4000:]
        assert "not recovered in 20s" in gateway.why.read_text(), gateway.why.read_text()
        assert 20 <= took < 60, took


def test_an_engine_that_never_starts_fails_the_gateway(ray_head):
    model = ray_head["dir"] / "never"
    model.mkdir()
    (model / "standin-fail-start").write_text("")
    gw = Gateway(ray_head, [ray_head["python"], str(STREAMING_VLLM), "serve", str(model)])
    try:
        rc = gw.proc.wait(240)
        took = time.monotonic() - gw.started
        print(f"engines that never start: gateway exit {rc} after {took:.1f} s")
        assert rc == 4, gw.text()[-4000:]
        why = gw.why.read_text()
        assert why.startswith("Ray Serve gateway: Serve could not start the replicas"), why
        assert "exited with status 3 while starting" in gw.text()
    finally:
        gw.stop()


def test_no_engine_process_outlives_the_gateway_however_its_replicas_end(ray_head):
    """Each engine's whole process group ends with its replica, its EngineCore-like child too: when
    Ray ends the replica's worker (TERM: it kills its direct children on the way out, the engine's
    server among them) and when the gateway stops the application."""
    model = ray_head["dir"] / "core-model"
    model.mkdir(exist_ok=True)
    started = len(_engines(ray_head))
    gw = Gateway(ray_head, [ray_head["python"], str(STREAMING_VLLM), "serve", str(model)])
    try:
        gw.wait_ready()
        engines = _engines(ray_head)[started:]
        assert len(engines) == 2 and all(_alive(e["engine_core_pid"]) for e in engines)
        # Ray ends one replica's worker (as when it stops a replica, or its head, under a job that
        # ends): the worker kills its direct children on the way out, the engine's server among them.
        first = engines[0]
        os.kill(_parent_of(first["pid"]), signal.SIGTERM)
        deadline = time.monotonic() + 30
        while _alive(first["pid"]) or _alive(first["engine_core_pid"]):
            assert time.monotonic() < deadline, "the engine's EngineCore outlived its replica"
            time.sleep(0.5)
    finally:
        gw.stop()
    pids = [pid for e in engines for pid in (e["pid"], e["engine_core_pid"])]
    deadline = time.monotonic() + 30
    while [pid for pid in pids if _alive(pid)]:
        assert time.monotonic() < deadline, f"outlived the gateway: {[pid for pid in pids if _alive(pid)]}"
        time.sleep(0.5)


def test_stock_standin_without_gpu_reservation(ray_head):
    """The plain stand-in vllm behind the gateway, no GPU counts (no packing rule); SIGTERM stops
    the application and its engines, and the gateway exits 128+15."""
    gw = Gateway(ray_head, [str(STOCK_VLLM), "serve", "stock-model"])
    try:
        gw.wait_ready()
        status, _, body = gw.get("/v1/models")
        assert status == 200 and json.loads(body)["data"][0]["id"] == "stock-model"
        records = [json.loads(Path(p).read_text()) for p in glob.glob(str(ray_head["dir"] / "standin" / "vllm-*.json"))]
        stock = [r for r in records if r["argv"][1] == "stock-model"]
        assert len(stock) == 2 and all(r["env"]["RAY_ADDRESS"] == ray_head["address"] for r in stock)
        assert all("--distributed-executor-backend" in r["argv"] for r in stock)
    finally:
        gw.stop()
    assert gw.proc.returncode == 128 + signal.SIGTERM, gw.text()[-2000:]
    assert "stopping the Serve application" in gw.text()
    deadline = time.monotonic() + 30
    while any(_alive(r["pid"]) for r in stock):
        assert time.monotonic() < deadline, "an engine outlived the gateway"
        time.sleep(0.5)
