"""Export a benchmark's record to an MLflow tracking server over its REST API, with urllib alone.

The endpoints (MLflow's REST API reference, https://mlflow.org/docs/latest/rest-api.html, and the
tracking server's artifact proxy, https://mlflow.org/docs/latest/self-hosting/architecture/tracking-server)::

    GET  /api/2.0/mlflow/experiments/get-by-name?experiment_name=N
    POST /api/2.0/mlflow/experiments/create          {name}
    POST /api/2.0/mlflow/runs/search                 {experiment_ids, filter, max_results}
    POST /api/2.0/mlflow/runs/create                 {experiment_id, run_name, start_time, tags}
    GET  /api/2.0/mlflow/runs/get?run_id=R
    POST /api/2.0/mlflow/runs/log-batch              {run_id, metrics, params, tags}
    GET  /api/2.0/mlflow-artifacts/artifacts?path=P  (list: skip an upload that is there already)
    PUT  /api/2.0/mlflow-artifacts/artifacts/<path>  (the file as the body)
    POST /api/2.0/mlflow/runs/update                 {run_id, status, end_time}

Idempotence: every run we create carries the tag ``gym.export_key=<run id>/<benchmark>``, set in
the same request that creates it, and the run is searched by that tag before one is created. A
second export (a requeued job, an export killed half-way, ``gym eval export --force``) finds the
run and completes it: params already there are not sent again (MLflow refuses to change one),
metrics are logged only when their value differs from the run's latest, the artifact is uploaded
only when it is missing or has another size. Creating a run is never retried blindly: after a
failed create the tag is searched again, so a lost answer cannot leave two runs.

Batches respect MLflow's limits (1000 metrics, 100 params, 100 tags a request). Artifacts go
through the tracking server's proxy (``mlflow server`` serves it by default: ``--serve-artifacts``,
artifacts under ``mlflow-artifacts:/``); a run whose artifacts live elsewhere (a server started
with ``--default-artifact-root s3://...``) gets its metrics, and a note that the rollouts stayed.

Credentials come from the environment only: ``MLFLOW_TRACKING_TOKEN`` (a bearer token), or
``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD``. They go into the Authorization header
and nowhere else; every error is one line, scrubbed of them.

Stdlib only, Python 3.8 syntax.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import socket
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from nemo_gym.orchestration import contract as c
from nemo_gym.orchestration.exporters import record as r
from nemo_gym.orchestration.exporters.spec import tracking_uri_problem

ENV_TRACKING_URI = "MLFLOW_TRACKING_URI"
ENV_TOKEN = "MLFLOW_TRACKING_TOKEN"
ENV_USERNAME = "MLFLOW_TRACKING_USERNAME"
ENV_PASSWORD = "MLFLOW_TRACKING_PASSWORD"

API = "/api/2.0/mlflow"
ARTIFACTS_API = "/api/2.0/mlflow-artifacts/artifacts"
EXPORT_KEY_TAG = "gym.export_key"
DEFAULT_EXPERIMENT = "nemo-gym"
DEFAULT_RUN_NAME = "{run_id}/{benchmark}"
RUN_NAME_FIELDS = ("run_id", "sweep_id", "benchmark", "model", "served_name")

# MLflow's LogBatch limits (per request).
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_TAGS_PER_BATCH = 100
TAG_VALUE_LIMIT = 5000  # every backend store takes this much

RETRYABLE_STATUSES = (429, 500, 502, 503, 504)
TIMEOUT_SECONDS = 30.0
UPLOAD_TIMEOUT_SECONDS = 600.0
ERROR_TEXT_LIMIT = 200

# A benchmark's state -> the MLflow run's status.
RUN_STATUS = {c.Status.FAILED: "FAILED", c.Status.CANCELLED: "KILLED", c.Status.PREEMPTED: "KILLED"}
DEFAULT_RUN_STATUS = "FINISHED"


class MlflowError(r.ExportError):
    def __init__(self, message: str, status: int | None = None, error_code: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect would carry the Authorization header to wherever it points: refuse it, and say
    where it pointed so that the user can fix the tracking URI."""

    def redirect_request(self, req: Any, fp: Any, code: Any, msg: Any, headers: Any, newurl: Any) -> None:
        raise MlflowError(
            f"MLflow at {_shown(req.full_url)} redirects to {_shown(newurl)}: set tracking_uri to that address",
            status=int(code),
        )


def _shown(url: str) -> str:
    """A URL fit for a message: scheme, host, port and path, never credentials or a query."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{host}{port}{parts.path}"


class MlflowClient:
    """The few calls an export makes, over one tracking server's REST API."""

    def __init__(
        self,
        tracking_uri: str,
        token: str | None = None,
        username: str | None = None,
        password: str | None = None,
        timeout: float = TIMEOUT_SECONDS,
        retries: int = 2,
        backoff: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        parts = urllib.parse.urlsplit(tracking_uri.strip())
        try:
            port = parts.port
        except ValueError:
            port = None
            parts = parts._replace(netloc="")  # refused below
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise MlflowError(
                f"tracking_uri {_shown(tracking_uri)!r} is not the http(s) address of an MLflow tracking server"
            )
        if parts.username or parts.password:
            # Refused rather than used: a URI is written to files (the spec, the config); credentials never are.
            raise MlflowError(
                f"tracking_uri {_shown(tracking_uri)!r} holds credentials: set {ENV_TOKEN} (or "
                f"{ENV_USERNAME} and {ENV_PASSWORD}) in the environment instead"
            )
        for name, value in ((ENV_TOKEN, token), (ENV_USERNAME, username), (ENV_PASSWORD, password)):
            refused = r.credential_problem(name, value)
            if refused:  # before any request: http.client would echo it in its "Invalid header value"
                raise MlflowError(refused)
        host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
        self.base = f"{parts.scheme}://{host}{f':{port}' if port else ''}{parts.path.rstrip('/')}"
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.sleep = sleep
        self._secrets = [s for s in (token, password) if s]
        self._auth = None
        if token:
            self._auth = f"Bearer {token}"
        elif username and password:
            pair = base64.b64encode(f"{username}:{password}".encode()).decode()
            self._auth = f"Basic {pair}"
            self._secrets.append(pair)
        self._opener = urllib.request.build_opener(_NoRedirect())

    @classmethod
    def from_environment(cls, tracking_uri: str, **kwargs: Any) -> MlflowClient:
        return cls(
            tracking_uri,
            token=os.environ.get(ENV_TOKEN) or None,
            username=os.environ.get(ENV_USERNAME) or None,
            password=os.environ.get(ENV_PASSWORD) or None,
            **kwargs,
        )

    # -- HTTP --------------------------------------------------------------------------------------

    def scrub(self, text: str) -> str:
        return r.scrub_secrets(text, self._secrets)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: dict[str, str] | None = None,
        upload: str | None = None,
        retry: bool = True,
    ) -> dict[str, Any]:
        """One API call -> its JSON answer; MlflowError (one line) when it fails. Connection
        failures and 429/5xx are retried ``retries`` times, unless ``retry`` is False."""
        url = self.base + path + ("?" + urllib.parse.urlencode(query) if query else "")
        attempts = 1 + (self.retries if retry else 0)
        for attempt in range(attempts):
            try:
                return self._send(method, url, body, upload)
            except MlflowError as exc:
                retryable = exc.status is None or exc.status in RETRYABLE_STATUSES
                if not retryable or attempt + 1 >= attempts:
                    raise
                self.sleep(self.backoff * (2**attempt))
        raise AssertionError("unreachable")

    def _send(self, method: str, url: str, body: Any, upload: str | None) -> dict[str, Any]:
        headers = {"Accept": "application/json"}
        if self._auth:
            headers["Authorization"] = self._auth
        data: Any = None
        timeout = self.timeout
        fh = None
        if upload is not None:
            fh = open(upload, "rb")  # noqa: SIM115 - closed below, after the request
            data = fh
            headers["Content-Type"] = "application/octet-stream"
            headers["Content-Length"] = str(os.fstat(fh.fileno()).st_size)
            timeout = max(self.timeout, UPLOAD_TIMEOUT_SECONDS)
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with self._opener.open(req, timeout=timeout) as resp:
                text = resp.read().decode("utf-8", errors="replace")
        except urllib.error.HTTPError as exc:
            raise self._http_error(method, url, exc) from None
        except MlflowError:
            raise
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            raise MlflowError(self.scrub(self._connection_problem(exc, timeout))) from None
        except ValueError as exc:  # http.client refusing a header or a URL: its text may quote the header
            raise MlflowError(
                self.scrub(
                    f"MLflow at {_shown(self.base)}: the request was refused before it was sent: "
                    f"{' '.join(str(exc).split())[:ERROR_TEXT_LIMIT]}"
                )
            ) from None
        finally:
            if fh is not None:
                fh.close()
        try:
            answer = json.loads(text) if text.strip() else {}
        except ValueError:
            raise MlflowError(
                f"{_shown(url)} did not answer JSON: is tracking_uri an MLflow tracking server?"
            ) from None
        return answer if isinstance(answer, dict) else {}

    def _connection_problem(self, exc: Exception, timeout: float) -> str:
        reason: Any = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        where = f"MLflow at {_shown(self.base)}"
        if isinstance(reason, ConnectionRefusedError):
            return f"{where} is not reachable: connection refused (is the server running?)"
        if isinstance(reason, (socket.timeout, TimeoutError)):
            return f"{where} did not answer within {timeout:g}s"
        if isinstance(reason, socket.gaierror):
            return f"{where}: cannot resolve the host name"
        if isinstance(reason, ssl.SSLError):
            return f"{where}: TLS failed ({reason.reason or reason})"
        if isinstance(reason, (ConnectionResetError, http.client.RemoteDisconnected)):
            return f"{where} closed the connection"
        text = " ".join(str(reason).split()) or type(reason).__name__
        return f"{where} is not reachable: {text}"

    def _http_error(self, method: str, url: str, exc: urllib.error.HTTPError) -> MlflowError:
        raw = exc.read().decode("utf-8", errors="replace") if exc.fp is not None else ""
        code, message = _error_fields(raw)
        message = self.scrub(" ".join(message.split()))[:ERROR_TEXT_LIMIT]
        endpoint = urllib.parse.urlsplit(url).path[len(urllib.parse.urlsplit(self.base).path) :]
        where = f"MLflow at {_shown(self.base)}"
        status = exc.code
        if status == 403 and "Host header" in raw:  # MLflow's DNS-rebinding guard, not an auth failure
            host = urllib.parse.urlsplit(self.base).netloc
            fix = f"the server does not accept the host name {host}: start it with --allowed-hosts listing {host}"
            return MlflowError(f"{where} refused {endpoint} (HTTP 403): {fix}", status, code)
        if status in (401, 403):
            if self._auth:
                fix = "the credentials in the environment were not accepted"
            else:
                fix = f"it needs credentials: set {ENV_TOKEN} (or {ENV_USERNAME} and {ENV_PASSWORD}) where the exports run"
            return MlflowError(f"{where} refused {endpoint} (HTTP {status}): {fix}", status, code)
        if status == 404 and not code:
            return MlflowError(
                f"no MLflow REST API at {_shown(self.base)} (HTTP 404 on {endpoint}): check tracking_uri", status, code
            )
        said = ": ".join(p for p in (code, message) if p)
        return MlflowError(
            f"{where} answered HTTP {status} to {method} {endpoint}" + (f": {said}" if said else ""), status, code
        )

    # -- the API -------------------------------------------------------------------------------------

    def get_experiment_id(self, name: str) -> str | None:
        try:
            answer = self.request("GET", f"{API}/experiments/get-by-name", query={"experiment_name": name})
        except MlflowError as exc:
            if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
                return None
            raise
        experiment = answer.get("experiment") or {}
        if experiment.get("lifecycle_stage") == "deleted":
            raise MlflowError(f"MLflow experiment {name!r} is deleted: restore it, or export to another experiment")
        return str(experiment["experiment_id"])

    def get_or_create_experiment(self, name: str) -> str:
        found = self.get_experiment_id(name)
        if found is not None:
            return found
        try:
            return str(self.request("POST", f"{API}/experiments/create", {"name": name}, retry=False)["experiment_id"])
        except MlflowError as exc:
            # Another job created it first, or our create went through and its answer was lost.
            again = self.get_experiment_id(name)
            if again is None:
                raise exc from None
            return again

    def find_run(self, experiment_id: str, export_key: str) -> dict[str, Any] | None:
        """The run carrying ``gym.export_key=export_key``; the oldest when a race made two."""
        answer = self.request(
            "POST",
            f"{API}/runs/search",
            {
                "experiment_ids": [experiment_id],
                "filter": f"tags.`{EXPORT_KEY_TAG}` = {_quoted(export_key)}",
                "max_results": 10,
                "order_by": ["attributes.start_time ASC"],
            },
        )
        runs = answer.get("runs") or []
        return runs[0] if runs else None

    def create_run(self, experiment_id: str, run_name: str, tags: dict[str, str], start_ms: int) -> dict[str, Any]:
        body = {
            "experiment_id": experiment_id,
            "run_name": run_name,
            "start_time": start_ms,
            "tags": [{"key": k, "value": v} for k, v in tags.items()],
        }
        return dict(self.request("POST", f"{API}/runs/create", body, retry=False)["run"])

    def get_run(self, run_id: str) -> dict[str, Any]:
        return dict(self.request("GET", f"{API}/runs/get", query={"run_id": run_id})["run"])

    def log_batch(
        self,
        run_id: str,
        metrics: dict[str, float],
        params: dict[str, str],
        tags: dict[str, str],
        timestamp_ms: int,
        step: int = 0,
    ) -> int:
        """Log in as many requests as MLflow's limits need (metrics at ``step``: a checkpoint's
        training step draws them as a curve across a sweep's runs); the number of requests made."""
        batches: list[dict[str, Any]] = []
        metric_rows = [{"key": k, "value": v, "timestamp": timestamp_ms, "step": step} for k, v in metrics.items()]
        param_rows = [{"key": k, "value": v} for k, v in params.items()]
        tag_rows = [{"key": k, "value": v} for k, v in tags.items()]
        for rows, field, size in (
            (param_rows, "params", MAX_PARAMS_PER_BATCH),
            (tag_rows, "tags", MAX_TAGS_PER_BATCH),
            (metric_rows, "metrics", MAX_METRICS_PER_BATCH),
        ):
            for start in range(0, len(rows), size):
                batches.append({"run_id": run_id, field: rows[start : start + size]})
        for batch in batches:
            self.request("POST", f"{API}/runs/log-batch", batch)
        return len(batches)

    def artifact_size(self, directory: str, name: str) -> int | None:
        """The size of an artifact already in the proxy's store, or None when it is not there."""
        answer = self.request("GET", ARTIFACTS_API, query={"path": directory})
        for entry in answer.get("files") or []:
            if entry.get("path") == name and not entry.get("is_dir"):
                size = entry.get("file_size")
                return int(size) if size is not None and str(size).isdigit() and str(size).isascii() else None
        return None

    def upload_artifact(self, directory: str, local_path: str, name: str) -> None:
        path = "/".join(urllib.parse.quote(p) for p in f"{directory}/{name}".split("/") if p)
        self.request("PUT", f"{ARTIFACTS_API}/{path}", upload=local_path)

    def set_terminated(self, run_id: str, status: str, end_ms: int) -> None:
        self.request("POST", f"{API}/runs/update", {"run_id": run_id, "status": status, "end_time": end_ms})


def _error_fields(raw: str) -> tuple[str, str]:
    """(error_code, message) of an MLflow error answer; ("", text) for anything else."""
    try:
        data = json.loads(raw)
    except ValueError:
        return "", raw
    if not isinstance(data, dict):
        return "", raw
    return str(data.get("error_code") or ""), str(data.get("message") or data.get("detail") or "")


def _quoted(value: str) -> str:
    """A string literal of MLflow's search syntax. Export keys are run ids and benchmark names
    (letters, digits, ``._-/``): a quote in one would be a bug upstream, not something to escape."""
    if "'" in value or "\\" in value:
        raise MlflowError(f"export key {value!r} cannot be searched for: it holds a quote or a backslash")
    return f"'{value}'"


def proxied_artifact_dir(artifact_uri: str) -> str | None:
    """The run's artifact directory as the proxy's path (``1/<run>/artifacts``), or None when the
    run's artifacts are not stored behind the tracking server (s3://, a local path, ...)."""
    parts = urllib.parse.urlsplit(artifact_uri)
    if parts.scheme == "mlflow-artifacts":
        return parts.path.strip("/")
    if parts.scheme in ("http", "https") and ARTIFACTS_API in parts.path:
        return parts.path.split(ARTIFACTS_API, 1)[1].strip("/")
    return None


# -- the export ----------------------------------------------------------------------------------------


def run_name(template: str, record: r.ExportRecord) -> str:
    """``{run_id}``, ``{benchmark}``, ... in the configured name replaced (other braces kept as written)."""
    values = {
        "run_id": record.run_id,
        "sweep_id": record.sweep_id or "",
        "benchmark": record.benchmark,
        "model": record.model,
        "served_name": record.served_name,
    }
    for field in RUN_NAME_FIELDS:
        template = template.replace("{" + field + "}", values[field])
    return template


def run_tags(record: r.ExportRecord, user_tags: dict[str, Any]) -> tuple[dict[str, str], list[str]]:
    """The run's tags: the user's (MLflow-safe keys), then ours (``gym.*``, which win)."""
    notes = []
    keys = r.mlflow_safe_names([str(k) for k in user_tags])
    renamed = r.renamed_note("tag", keys)
    if renamed:
        notes.append(renamed)
    tags = {keys[str(k)]: r.param_text(v) for k, v in user_tags.items()}
    tags.update({f"gym.{k}": v for k, v in record.identity().items()})
    tags["gym.samples"] = record.completeness_text()
    tags["gym.complete"] = "true" if record.complete else "false"
    tags[EXPORT_KEY_TAG] = record.export_key
    if record.notes:
        tags["gym.notes"] = "; ".join(record.notes)
    return {k: v[:TAG_VALUE_LIMIT] for k, v in tags.items()}, notes


def _missing_params(params: dict[str, str], logged: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """Params the run does not have yet; one it has with another value stays (MLflow forbids a change)."""
    changed = sorted(k for k, v in params.items() if k in logged and logged[k] != v)
    notes = (
        [f"kept the earlier value of {len(changed)} param(s) MLflow cannot change: {', '.join(changed[:3])}"]
        if changed
        else []
    )
    return {k: v for k, v in params.items() if k not in logged}, notes


def export_to_mlflow(
    record: r.ExportRecord,
    settings: dict[str, Any],
    on_run_id: Callable[[str], None],
    client: MlflowClient | None = None,
    now: float | None = None,
) -> r.ExportOutcome:
    """Export one record; ``on_run_id`` hears the MLflow run id as soon as it is known (for the receipt)."""
    if client is None:
        client = _client_from_settings(settings)
    now_ms = int((time.time() if now is None else now) * 1000)
    experiment = str(settings.get("experiment") or DEFAULT_EXPERIMENT)
    experiment_id = client.get_or_create_experiment(experiment)
    tags, notes = run_tags(record, dict(settings.get("tags") or {}))
    run = _find_or_create_run(client, experiment_id, record, settings, now_ms)
    run_id = str(run["info"]["run_id"])
    on_run_id(run_id)

    metrics, fresh, logged_notes = _log_what_is_new(client, run_id, record, tags, now_ms)
    notes += logged_notes
    notes.append(_upload_rollouts(client, run, record))
    end_ms = int(record.ended_at * 1000) if record.ended_at else now_ms
    client.set_terminated(run_id, RUN_STATUS.get(record.state, DEFAULT_RUN_STATUS), end_ms)
    summary = f"run {run_id} in experiment {experiment!r}: {metrics} metrics ({fresh} new), {len(record.params)} params"
    return r.ExportOutcome(run_id, "; ".join([summary] + [n for n in notes if n]))


def _client_from_settings(settings: dict[str, Any]) -> MlflowClient:
    tracking_uri = settings.get("tracking_uri") or os.environ.get(ENV_TRACKING_URI)
    if not tracking_uri:
        raise MlflowError(f"no tracking_uri: set it in the mlflow exporter's settings or {ENV_TRACKING_URI}")
    problem = tracking_uri_problem(str(tracking_uri))  # the settings' were checked with the spec
    if problem and not settings.get("tracking_uri"):
        raise MlflowError(f"{ENV_TRACKING_URI} (the address, as the mlflow exporter's settings have none): {problem}")
    return MlflowClient.from_environment(str(tracking_uri))


def _find_or_create_run(
    client: MlflowClient, experiment_id: str, record: r.ExportRecord, settings: dict[str, Any], now_ms: int
) -> dict[str, Any]:
    """The record's run, found by its export key: an export run again adds to the run it made."""
    run = client.find_run(experiment_id, record.export_key)
    if run is not None:
        return run
    start_ms = int(record.started_at * 1000) if record.started_at else now_ms
    name = run_name(str(settings.get("run_name") or DEFAULT_RUN_NAME), record)
    try:
        return client.create_run(experiment_id, name, {EXPORT_KEY_TAG: record.export_key}, start_ms)
    except MlflowError:
        run = client.find_run(experiment_id, record.export_key)  # created, but the answer was lost?
        if run is None:
            raise
        return run


def _log_what_is_new(
    client: MlflowClient, run_id: str, record: r.ExportRecord, tags: dict[str, str], now_ms: int
) -> tuple[int, int, list[str]]:
    """Log the params and metrics the run does not have yet (an export run again sends only what
    changed), with the tags; (metrics, new metrics, notes)."""
    data = client.get_run(run_id).get("data") or {}
    logged_params = {p["key"]: p.get("value", "") for p in data.get("params") or []}
    logged_metrics = {m["key"]: m.get("value") for m in data.get("metrics") or []}
    params, param_notes = _missing_params(record.params, logged_params)
    names = r.mlflow_safe_names(list(record.metrics))
    renamed = r.renamed_note("metric", names)
    metrics = {names[k]: v for k, v in record.metrics.items()}
    metrics.update(record.summary_metrics())
    fresh = {k: v for k, v in metrics.items() if logged_metrics.get(k) != v}
    client.log_batch(run_id, fresh, params, tags, now_ms, record.step or 0)
    return len(metrics), len(fresh), param_notes + ([renamed] if renamed else [])


def _upload_rollouts(client: MlflowClient, run: dict[str, Any], record: r.ExportRecord) -> str:
    """Upload the rollouts file as the run's artifact; a few words on what happened."""
    if not record.rollouts_path:
        return "no rollouts file to upload"
    artifact_uri = str(run["info"].get("artifact_uri") or "")
    directory = proxied_artifact_dir(artifact_uri)
    scheme = urllib.parse.urlsplit(artifact_uri).scheme or "a local path"
    if directory is None:
        return f"rollouts not uploaded: the run keeps its artifacts in {scheme}, not behind the tracking server"
    name = os.path.basename(record.rollouts_path)
    size = os.path.getsize(record.rollouts_path)
    try:
        if client.artifact_size(directory, name) == size:
            return f"{name} uploaded already"
        client.upload_artifact(directory, record.rollouts_path, name)
    except MlflowError as exc:
        if exc.status == 503 or (exc.status == 404 and not exc.error_code):
            return (
                f"rollouts not uploaded: the server does not serve artifacts (start it with --serve-artifacts): {exc}"
            )
        raise
    return f"{name} uploaded ({size} bytes)"
