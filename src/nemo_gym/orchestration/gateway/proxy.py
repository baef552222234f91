"""The gateway's Serve deployment: each replica owns one `vllm serve` engine (``replica.Engine``),
answers Serve's health checks with the engine's ``/health``, and passes every HTTP request Serve
routes to it on to its engine, streamed.

Bodies stream chunk by chunk (a ``StreamingResponse`` fed as the engine's bytes arrive; Serve's
proxy passes each ASGI message on), hop-by-hop headers are dropped both ways, and there is no
total or read timeout (only a connect timeout). Like ``replica``, this module travels to Ray's
workers by value and imports neither Ray nor aiohttp until a replica runs.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from typing import Any

from nemo_gym.orchestration.gateway.replica import Engine

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
# Set by Serve's proxy (uvicorn) on the client's hop: the engine's would come twice.
_RESPONSE_REPLACED = frozenset({"date", "server"})
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
    """Drop hop-by-hop fields, and those the next hop sets itself (Host/Content-Length on requests,
    Date/Server on responses)."""
    items = list(headers)
    drop = HOP_BY_HOP | connection_tokens(items) | (_REQUEST_REPLACED if request else _RESPONSE_REPLACED)
    return [(k, v) for k, v in items if k.lower() not in drop]


@dataclass(frozen=True)
class ReplicaSettings:
    """What every replica is given: the engine's command and where its logs go."""

    argv: tuple[str, ...]
    address: str  # the Ray cluster, RAY_ADDRESS of the engine
    cwd: str
    log_dir: str | None
    startup_timeout: float  # seconds for the engine's first healthy /health
    health_timeout: float  # seconds for one /health probe
    connect_timeout: float
    stop_timeout: float


class EngineReplica:
    """One Serve replica: starts its engine, waits for it, then serves (wrapped with
    ``serve.deployment`` at run time)."""

    async def __init__(self, settings: ReplicaSettings) -> None:  # type: ignore[misc]  # Serve awaits it
        import aiohttp
        from ray import serve

        self.settings = settings
        self.name = str(serve.get_replica_context().replica_id.unique_id)
        log_path = os.path.join(settings.log_dir, f"replica-{self.name}.log") if settings.log_dir else None
        self.engine = Engine(list(settings.argv), settings.address, settings.cwd, log_path)
        connector = aiohttp.TCPConnector(limit=0, limit_per_host=0)  # the default caps at 100 in flight
        timeout = aiohttp.ClientTimeout(total=None, sock_read=None, connect=None, sock_connect=settings.connect_timeout)
        self.session = aiohttp.ClientSession(connector=connector, timeout=timeout, auto_decompress=False)
        pid = self.engine.start()
        print(
            f"replica {self.name}: engine pid {pid} on port {self.engine.port}: {' '.join(self.engine.argv)}",
            flush=True,
        )
        deadline = time.monotonic() + settings.startup_timeout
        while not await self._healthy():
            rc = self.engine.poll()
            if rc is not None:
                await self.session.close()
                raise RuntimeError(
                    f"replica {self.name}: engine exited with status {rc} while starting{self.engine.tail()}"
                )
            if time.monotonic() > deadline:
                self.engine.stop(settings.stop_timeout)
                await self.session.close()
                raise TimeoutError(f"replica {self.name}: engine not healthy in {settings.startup_timeout:g}s")
            await asyncio.sleep(0.5)
        print(f"replica {self.name}: engine healthy", flush=True)
        self.watcher = asyncio.get_running_loop().create_task(self._watch_engine())

    async def _watch_engine(self) -> None:
        """An engine that exits takes its replica with it at once: Serve's routers stop sending it
        requests and its controller starts a replacement, without waiting for three failed
        health checks (a wedged engine, alive but not answering, is left to those)."""
        while self.engine.poll() is None:
            await asyncio.sleep(0.2)
        self._end()

    def _end(self) -> None:
        """The engine has exited: its leftovers killed, and this replica's process ended."""
        rc = self.engine.poll()
        print(
            f"replica {self.name}: engine pid {self.engine.pid} exited with status {rc}; replica ends{self.engine.tail()}",
            flush=True,
        )
        self.engine.kill_group()  # its EngineCore and workers, which outlive it
        os._exit(1)

    async def _healthy(self) -> bool:
        import aiohttp

        try:
            timeout = aiohttp.ClientTimeout(total=self.settings.health_timeout)
            async with self.session.get(self.engine.url + "/health", timeout=timeout) as resp:
                await resp.read()
                return resp.status == 200
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            return False

    async def check_health(self) -> None:
        """Serve's per-replica health check: the engine is alive and its /health answers 200.
        Three failures in a row and Serve replaces this replica (and so its engine)."""
        rc = self.engine.poll()
        if rc is not None:
            raise RuntimeError(f"replica {self.name}: engine pid {self.engine.pid} exited with status {rc}")
        if not await self._healthy():
            raise RuntimeError(f"replica {self.name}: engine /health failing")

    async def __call__(self, request: Any) -> Any:
        import aiohttp
        from starlette.responses import JSONResponse, StreamingResponse

        body = await request.body()
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        try:
            upstream = await self.session.request(
                request.method,
                self.engine.url + path,
                headers=filter_headers(request.headers.items(), request=True),
                data=body if body else None,
                allow_redirects=False,
                skip_auto_headers=_NO_AUTO_HEADERS,
            )
        except (aiohttp.ClientConnectionError, asyncio.TimeoutError) as exc:
            if self.engine.poll() is not None:
                self._end()  # this request is lost; the next ones go to the other replicas
            message = f"replica {self.name}: engine unreachable: {exc}"
            return JSONResponse({"error": {"message": message, "code": 502}}, status_code=502)
        response = StreamingResponse(_relay(upstream), status_code=upstream.status)
        headers = filter_headers(upstream.headers.items(), request=False) + [("X-Gateway-Replica", self.name)]
        response.raw_headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        return response

    async def __del__(self) -> None:
        """Serve stops a replica (replaced, scaled down, the application deleted): its engine too."""
        engine = getattr(self, "engine", None)
        if engine is not None:
            await asyncio.get_running_loop().run_in_executor(None, engine.stop, self.settings.stop_timeout)
        session = getattr(self, "session", None)
        if session is not None:
            await session.close()


async def _relay(upstream: Any) -> AsyncIterator[bytes]:
    """The engine's body as it arrives; a client that goes away closes the engine's connection,
    which makes vLLM abort the request."""
    done = False
    try:
        async for chunk in upstream.content.iter_any():
            yield chunk
        done = True
    finally:
        if done:
            upstream.release()
        else:
            upstream.close()
