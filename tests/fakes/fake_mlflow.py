"""A tiny stand-in for an MLflow tracking server, in-process on loopback, for the REST client's unit tests.

It keeps experiments and runs in memory and answers the endpoints our client calls the way MLflow
does (the JSON shapes of https://mlflow.org/docs/latest/rest-api.html), plus faults a test asks
for: a status for the next N calls of an endpoint, a run created whose answer is then lost, a body
echoing the request's headers. The real server is exercised in tests/exporters.
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

API = "/api/2.0/mlflow"
ARTIFACTS = "/api/2.0/mlflow-artifacts/artifacts"


@dataclass
class Fault:
    status: int
    body: str = ""
    content_type: str = "application/json"
    times: int = 1
    then_do_it: bool = False  # do the work, then answer with the fault (a lost answer)
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class FakeMlflow:
    experiments: dict[str, str] = field(default_factory=dict)  # name -> id
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)
    artifacts: dict[str, bytes] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, str], Any]] = field(default_factory=list)
    faults: dict[str, Fault] = field(default_factory=dict)  # endpoint (after /api/2.0) -> fault
    lock: threading.Lock = field(default_factory=threading.Lock)

    def fail(
        self,
        endpoint: str,
        status: int,
        body: Any = "",
        times: int = 1,
        then_do_it: bool = False,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        text = body if isinstance(body, str) else json.dumps(body)
        self.faults[endpoint] = Fault(status, text, content_type, times, then_do_it, dict(headers or {}))

    def calls(self, endpoint: str) -> list[Any]:
        return [body for _, path, _, body in self.requests if path.endswith(endpoint)]

    # -- answering ----------------------------------------------------------------------------------

    def answer(
        self, method: str, path: str, query: dict[str, str], headers: dict[str, str], body: Any
    ) -> tuple[int, str, str, dict[str, str]]:
        with self.lock:
            self.requests.append((method, path, headers, body))
            endpoint = path.split("/api/2.0", 1)[-1]
            fault = self.faults.get(endpoint)
            if fault is not None and fault.times > 0:
                fault.times -= 1
                if fault.then_do_it:
                    self._route(method, path, query, body)
                text = fault.body.replace("{headers}", json.dumps(headers))
                return fault.status, fault.content_type, text, fault.headers
            try:
                status, answer = self._route(method, path, query, body)
            except KeyError as exc:
                status, answer = 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": f"{exc} not found"}
            return status, "application/json", json.dumps(answer), {}

    def _route(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        if path.startswith(ARTIFACTS + "/") and method == "PUT":
            self.artifacts[path[len(ARTIFACTS) + 1 :]] = body
            return 200, {}
        if path == ARTIFACTS:
            prefix = query.get("path", "").strip("/") + "/"
            files = [
                {"path": k[len(prefix) :], "is_dir": False, "file_size": str(len(v))}
                for k, v in self.artifacts.items()
                if k.startswith(prefix)
            ]
            return 200, {"files": files} if files else {}
        handler = {
            ("GET", "/experiments/get-by-name"): self._get_experiment,
            ("POST", "/experiments/create"): self._create_experiment,
            ("POST", "/runs/search"): self._search,
            ("POST", "/runs/create"): self._create_run,
            ("GET", "/runs/get"): self._get_run,
            ("POST", "/runs/log-batch"): self._log_batch,
            ("POST", "/runs/update"): self._update,
        }.get((method, path[len(API) :]))
        if handler is None:
            return 404, {"error_code": "ENDPOINT_NOT_FOUND", "message": "no such endpoint"}
        return handler(query if method == "GET" else body)

    def _get_experiment(self, q: dict[str, str]) -> tuple[int, Any]:
        name = q["experiment_name"]
        if name not in self.experiments:
            return 404, {
                "error_code": "RESOURCE_DOES_NOT_EXIST",
                "message": f"Could not find experiment with name '{name}'",
            }
        return 200, {"experiment": {"experiment_id": self.experiments[name], "name": name, "lifecycle_stage": "active"}}

    def _create_experiment(self, b: dict[str, Any]) -> tuple[int, Any]:
        if b["name"] in self.experiments:
            return 400, {"error_code": "RESOURCE_ALREADY_EXISTS", "message": "exists"}
        self.experiments[b["name"]] = str(len(self.experiments) + 1)
        return 200, {"experiment_id": self.experiments[b["name"]]}

    def _search(self, b: dict[str, Any]) -> tuple[int, Any]:
        match = re.fullmatch(r"tags\.`([^`]+)` = '([^']*)'", b["filter"])
        assert match, b["filter"]
        key, value = match.groups()
        found = [
            self._run_doc(r)
            for r in self.runs.values()
            if r["experiment_id"] in b["experiment_ids"] and r["tags"].get(key) == value
        ]
        return 200, {"runs": found} if found else {}

    def _create_run(self, b: dict[str, Any]) -> tuple[int, Any]:
        run_id = uuid.uuid4().hex
        self.runs[run_id] = {
            "run_id": run_id,
            "experiment_id": b["experiment_id"],
            "run_name": b.get("run_name", ""),
            "status": "RUNNING",
            "start_time": b.get("start_time"),
            "end_time": None,
            "artifact_uri": f"mlflow-artifacts:/{b['experiment_id']}/{run_id}/artifacts",
            "tags": {t["key"]: t["value"] for t in b.get("tags", [])},
            "params": {},
            "metrics": {},
        }
        return 200, {"run": self._run_doc(self.runs[run_id])}

    def _get_run(self, q: dict[str, str]) -> tuple[int, Any]:
        return 200, {"run": self._run_doc(self.runs[q["run_id"]])}

    def _log_batch(self, b: dict[str, Any]) -> tuple[int, Any]:
        run = self.runs[b["run_id"]]
        for p in b.get("params", []):
            if p["key"] in run["params"] and run["params"][p["key"]] != p["value"]:
                return 400, {"error_code": "INVALID_PARAMETER_VALUE", "message": f"param {p['key']} changed"}
            run["params"][p["key"]] = p["value"]
        for t in b.get("tags", []):
            run["tags"][t["key"]] = t["value"]
        for m in b.get("metrics", []):
            run["metrics"].setdefault(m["key"], []).append(m["value"])
            run.setdefault("metric_steps", {}).setdefault(m["key"], []).append(m.get("step"))
        return 200, {}

    def _update(self, b: dict[str, Any]) -> tuple[int, Any]:
        run = self.runs[b["run_id"]]
        run["status"], run["end_time"] = b["status"], b.get("end_time")
        return 200, {"run_info": {"run_id": run["run_id"], "status": run["status"]}}

    @staticmethod
    def _run_doc(run: dict[str, Any]) -> dict[str, Any]:
        info = {
            k: run[k]
            for k in ("run_id", "experiment_id", "run_name", "status", "start_time", "end_time", "artifact_uri")
        }
        data = {
            "params": [{"key": k, "value": v} for k, v in run["params"].items()],
            "tags": [{"key": k, "value": v} for k, v in run["tags"].items()],
            "metrics": [{"key": k, "value": v[-1], "step": 0} for k, v in run["metrics"].items()],
        }
        return {"info": info, "data": data}


class FakeMlflowServer:
    """``FakeMlflow`` behind a real HTTP server on 127.0.0.1; a context manager."""

    def __init__(self, state: FakeMlflow | None = None) -> None:
        self.state = state or FakeMlflow()
        fake = self.state

        class Handler(BaseHTTPRequestHandler):
            def _serve(self) -> None:
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body: Any = raw
                if self.headers.get("Content-Type") == "application/json" and raw:
                    body = json.loads(raw)
                status, ctype, text, extra = fake.answer(self.command, parts.path, query, dict(self.headers), body)
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                for name, value in extra.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = _serve

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def __enter__(self) -> FakeMlflowServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
