"""The lock on a warm lane's vLLM server: its development endpoints answer only the job.

A warm lane (``job.deployment: reload``) switches a running vLLM server's weights through
``POST /collective_rpc``, an endpoint vLLM opens with ``VLLM_SERVER_DEV_MODE=1`` to anyone who
can reach the port, with its siblings (``/sleep``, ``/reset_prefix_cache``, ...). vLLM's own
``--api-key`` guards only ``/v1`` and its kin, so this ASGI middleware (given to vLLM by
``--middleware``) refuses every development endpoint to a request without the job's token: a
random secret the job writes before the server starts, readable by the job's user only, named by
``GYM_RELOAD_TOKEN_FILE``. No token file, no development endpoint (it fails closed).

Stdlib only: it runs inside vLLM's Python, imported from the job's shipped tree.
"""

from __future__ import annotations

import hmac
import os
from collections.abc import Awaitable, Callable
from typing import Any

TOKEN_ENV = "GYM_RELOAD_TOKEN_FILE"
TOKEN_HEADER = "x-gym-reload-token"
# What vLLM's development mode opens (its dev routers, profiling and the weight-transfer hooks),
# none of which a benchmark's requests use.
DEV_PATHS = frozenset(
    {
        "/collective_rpc",
        "/sleep",
        "/wake_up",
        "/is_sleeping",
        "/release_kv_cache_memory",
        "/reset_prefix_cache",
        "/reset_mm_cache",
        "/reset_encoder_cache",
        "/server_info",
        "/start_profile",
        "/stop_profile",
        "/update_weights",
        "/init_weight_transfer",
        "/pause",
        "/resume",
        "/scale_elastic_ep",
    }
)
_REFUSED = b'{"error": "this endpoint answers only the job that started the server"}'


def guarded(path: str) -> bool:
    """Whether a request path is a development endpoint (a trailing slash changes nothing)."""
    return (path.rstrip("/") or "/") in DEV_PATHS


def job_token() -> str | None:
    """The job's token, read from its file each time (never cached: a missing file stays closed)."""
    path = os.environ.get(TOKEN_ENV)
    if not path:
        return None
    try:
        with open(path, encoding="ascii") as fh:
            token = fh.read(256).strip()
    except (OSError, UnicodeDecodeError):
        return None
    return token or None


def allowed(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the request carries the job's token (compared in constant time)."""
    token = job_token()
    if token is None:
        return False
    given = [value for name, value in headers if name.lower() == TOKEN_HEADER.encode()]
    return len(given) == 1 and hmac.compare_digest(given[0], token.encode())


Scope = dict
Message = dict
App = Callable[[Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]


class ReloadGuard:
    """ASGI middleware: a development endpoint without the job's token is refused (403)."""

    def __init__(self, app: App, **_: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope.get("type") in ("http", "websocket"):
            path = str(scope.get("path", ""))
            root = str(scope.get("root_path", ""))
            if root and path.startswith(root):
                path = path[len(root) :]
            if guarded(path) and not allowed(list(scope.get("headers") or [])):
                await _refuse(scope, send)
                return
        await self.app(scope, receive, send)


async def _refuse(scope: Scope, send: Any) -> None:
    if scope.get("type") == "websocket":
        await send({"type": "websocket.close", "code": 1008})
        return
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(_REFUSED)).encode())]
    await send({"type": "http.response.start", "status": 403, "headers": headers})
    await send({"type": "http.response.body", "body": _REFUSED})
