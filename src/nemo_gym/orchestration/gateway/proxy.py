"""The gateway's HTTP side: one OpenAI-compatible endpoint that routes each request to a replica
and streams it through, ``GET /health`` for the whole service, ``GET /gateway/status``.

Bodies stream chunk by chunk in both directions' framing, hop-by-hop headers are dropped both
ways, and there is no total or read timeout (only a connect timeout, on the session)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable
from typing import Any

from nemo_gym.orchestration.gateway.supervision import Replica, Supervisor, log

# RFC 9110 §7.6.1 connection-specific fields, plus the legacy Proxy-Connection.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "trailers",
        "transfer-encoding",
        "upgrade",
    }
)
# Set by the proxy itself for the new hop, not copied from the client.
_REQUEST_REPLACED = frozenset({"host", "content-length"})
# aiohttp's client would add these when the client did not send them (gzip to a client that did
# not ask for it, since the proxy forwards bodies undecoded).
_NO_AUTO_HEADERS = ("Accept", "Accept-Encoding", "User-Agent", "Content-Type")


def connection_tokens(headers: Iterable[tuple[str, str]]) -> set[str]:
    """Header names listed in Connection: they are hop-by-hop for this message too."""
    names: set[str] = set()
    for key, value in headers:
        if key.lower() == "connection":
            names.update(tok.strip().lower() for tok in value.split(",") if tok.strip())
    return names


def filter_headers(headers: Iterable[tuple[str, str]], *, request: bool) -> list[tuple[str, str]]:
    """Drop hop-by-hop fields (and, on requests, Host/Content-Length which the new hop sets)."""
    items = list(headers)
    drop = HOP_BY_HOP | connection_tokens(items)
    if request:
        drop = drop | _REQUEST_REPLACED
    return [(k, v) for k, v in items if k.lower() not in drop]


def pick_replica(replicas: list[Replica], turn: int) -> Replica | None:
    """Least outstanding requests among routable replicas; ties go round robin from `turn`."""
    candidates = [r for r in replicas if r.alive and r.healthy] or [r for r in replicas if r.alive]
    if not candidates:
        return None
    start = turn % len(candidates)
    rotated = candidates[start:] + candidates[:start]
    return min(rotated, key=lambda r: r.outstanding)


class Proxy:
    """The HTTP endpoint in front of the supervisor's replicas."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor
        self.turn = itertools.count()

    def app(self) -> Any:
        from aiohttp import web

        app = web.Application(client_max_size=1 << 31)
        app.router.add_get("/health", self.handle_health)
        app.router.add_get("/gateway/status", self.handle_status)
        app.router.add_route("*", "/{tail:.*}", self.handle_proxy)
        return app

    async def handle_status(self, request: Any) -> Any:
        from aiohttp import web

        return web.json_response(self.supervisor.status())

    async def handle_health(self, request: Any) -> Any:
        from aiohttp import web

        supervisor = self.supervisor
        if supervisor.state == "ready":
            results = await asyncio.gather(*(supervisor.probe(r) for r in supervisor.replicas))
            for replica, ok in zip(supervisor.replicas, results):
                replica.healthy = ok
            ok = supervisor.state == "ready" and all(results)
        else:
            ok = False
        body = supervisor.status()
        return web.json_response(body, status=200 if ok else 503)

    async def handle_proxy(self, request: Any) -> Any:
        import aiohttp
        from aiohttp import web

        if self.supervisor.state != "ready":
            message = f"gateway is {self.supervisor.state}"
            return web.json_response({"error": {"message": message, "code": 503}}, status=503)
        replica = pick_replica(self.supervisor.replicas, next(self.turn))
        if replica is None:
            return web.json_response({"error": {"message": "no live replica", "code": 503}}, status=503)
        body = await request.read()
        headers = filter_headers(request.headers.items(), request=True)
        replica.outstanding += 1
        response: web.StreamResponse | None = None
        try:
            async with self.supervisor.session.request(
                request.method,
                replica.url + request.path_qs,
                headers=headers,
                data=body if body or request.can_read_body else None,
                allow_redirects=False,
                skip_auto_headers=_NO_AUTO_HEADERS,
            ) as upstream:
                response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
                for key, value in filter_headers(upstream.headers.items(), request=False):
                    response.headers.add(key, value)
                response.headers["X-Gateway-Replica"] = str(replica.index)
                await response.prepare(request)
                try:
                    async for chunk in upstream.content.iter_any():
                        await response.write(chunk)
                    await response.write_eof()
                except (ConnectionResetError, BrokenPipeError):
                    # The client went away: leaving the block closes the upstream connection, which
                    # makes vLLM abort the request.
                    return response
                replica.served += 1
                return response
        except (aiohttp.ClientConnectionError, asyncio.TimeoutError) as exc:
            if response is not None and response.prepared:
                # Headers already went out: all we can do is cut the connection, as the replica did.
                log(f"replica {replica.index}: response cut mid-stream: {exc!r}")
                raise
            return web.json_response(
                {"error": {"message": f"replica {replica.index} unreachable: {exc}", "code": 502}}, status=502
            )
        finally:
            replica.outstanding -= 1
