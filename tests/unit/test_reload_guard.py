"""The guard a warm lane's vLLM server runs (--middleware): its development endpoints answer only
a request with the job's token; everything else passes through untouched. Driven as vLLM drives
an ASGI middleware (the stand-in vLLM of the cluster tests runs it the same way)."""

from __future__ import annotations

import asyncio

import pytest

from nemo_gym.orchestration.reload_guard import TOKEN_ENV, TOKEN_HEADER, ReloadGuard


def call(path: str, headers: dict[str, str] | None = None, root_path: str = "", kind: str = "http") -> list[dict]:
    """What the guard sent (nothing when it let the request through to the app, which says so)."""
    sent: list[dict] = []

    async def app(scope, receive, send) -> None:
        sent.append({"type": "app", "path": scope["path"]})

    async def send(message) -> None:
        sent.append(message)

    async def receive():
        return {"type": "http.request", "body": b""}

    scope = {
        "type": kind,
        "path": path,
        "root_path": root_path,
        "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()],
    }
    asyncio.run(ReloadGuard(app)(scope, receive, send))
    return sent


@pytest.fixture
def token(tmp_path, monkeypatch) -> str:
    path = tmp_path / "reload.token"
    path.write_text("f00d\n")
    monkeypatch.setenv(TOKEN_ENV, str(path))
    return "f00d"


def refused(sent: list[dict]) -> bool:
    return any(m.get("status") == 403 or m.get("type") == "websocket.close" for m in sent)


@pytest.mark.parametrize("path", ["/collective_rpc", "/collective_rpc/", "/sleep", "/wake_up", "/reset_prefix_cache"])
def test_a_development_endpoint_without_the_token_is_refused(token, path) -> None:
    assert refused(call(path))
    assert refused(call(path, {TOKEN_HEADER: "not-it"}))
    assert refused(call(path, {TOKEN_HEADER: token + "0"}))


def test_the_job_s_token_opens_it(token) -> None:
    assert call("/collective_rpc", {TOKEN_HEADER: token}) == [{"type": "app", "path": "/collective_rpc"}]


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/models", "/health", "/metrics", "/version"])
def test_a_benchmark_s_requests_pass_without_it(token, path) -> None:
    assert call(path) == [{"type": "app", "path": path}]


def test_no_token_file_closes_the_endpoints_to_everyone(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(TOKEN_ENV, str(tmp_path / "never-written"))
    assert refused(call("/collective_rpc", {TOKEN_HEADER: ""}))
    monkeypatch.delenv(TOKEN_ENV)
    assert refused(call("/collective_rpc", {TOKEN_HEADER: "anything"}))


def test_a_mounted_root_path_or_a_websocket_does_not_get_around_it(token) -> None:
    assert refused(call("/api/collective_rpc", root_path="/api"))
    assert refused(call("/collective_rpc", kind="websocket"))
