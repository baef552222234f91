"""The gateway's watch over its Serve application: pure rules that read what ``serve.status()``
says (the application's status, the deployment's running replicas) and decide when the service
is ready, degraded, recovered, or lost for good, with the exit status that tells the job.

The bound: Serve replaces a replica whose engine died (or whose health check failed three times
in a row) while the others keep serving; the gateway fails only when the service stays short of
its replicas for longer than ``recovery_timeout`` (by default the start-up timeout: a replacement
loads the model again, and may take as long as the first start), or when Serve gives up
(``DEPLOY_FAILED``)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

EXIT_USAGE = 2
EXIT_NOT_RECOVERED = 3  # serving, then short of replicas for longer than the bound (or Serve gave up)
EXIT_NOT_READY = 4  # the replicas never all came up: start-up timeout, or Serve gave up starting them
EXIT_NO_CLUSTER = 5  # cannot join the Ray cluster, or Serve cannot start on it

# serve.status()'s application words (ray.serve.schema.ApplicationStatus).
RUNNING = "RUNNING"
DEPLOY_FAILED = "DEPLOY_FAILED"


def log(message: str) -> None:
    print(f"[gateway {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Observation:
    """One look at the application: its status word, running replicas of the target, Serve's message."""

    status: str
    running: int
    target: int
    message: str = ""

    @property
    def whole(self) -> bool:
        return self.status == RUNNING and self.running >= self.target

    def describe(self) -> str:
        text = f"{self.status}, {self.running} of {self.target} replica(s) running"
        return f"{text}: {self.message[:300]}" if self.message else text


@dataclass(frozen=True)
class Verdict:
    """The gateway ends: its exit status and why (one line, what the job's status shows)."""

    code: int
    reason: str


class Watch:
    """What the gateway makes of each observation, in order (``now`` in monotonic seconds)."""

    def __init__(self, started: float, startup_timeout: float, recovery_timeout: float) -> None:
        self.started = started
        self.startup_timeout = startup_timeout
        self.recovery_timeout = recovery_timeout
        self.ready_at: float | None = None
        self.degraded_since: float | None = None
        self.recoveries: list[float] = []  # seconds each degradation lasted

    @property
    def state(self) -> str:
        if self.ready_at is None:
            return "starting"
        return "degraded" if self.degraded_since is not None else "ready"

    def observe(self, now: float, seen: Observation) -> tuple[Verdict | None, str | None]:
        """The verdict (None: go on) and a line for the log when something changed."""
        if self.ready_at is None:
            return self._starting(now, seen)
        if seen.status == DEPLOY_FAILED:
            return Verdict(EXIT_NOT_RECOVERED, f"Serve gave up replacing replicas ({seen.describe()})"), None
        if seen.whole:
            if self.degraded_since is None:
                return None, None
            took = now - self.degraded_since
            self.degraded_since = None
            self.recoveries.append(took)
            return None, f"recovered in {took:.1f}s: {seen.describe()}"
        if self.degraded_since is None:
            self.degraded_since = now
            return None, f"degraded ({seen.describe()}); Serve is replacing; bound {self.recovery_timeout:g}s"
        if now - self.degraded_since > self.recovery_timeout:
            reason = f"not recovered in {self.recovery_timeout:g}s ({seen.describe()})"
            return Verdict(EXIT_NOT_RECOVERED, reason), None
        return None, None

    def _starting(self, now: float, seen: Observation) -> tuple[Verdict | None, str | None]:
        if seen.status == DEPLOY_FAILED:
            return Verdict(EXIT_NOT_READY, f"Serve could not start the replicas ({seen.describe()})"), None
        if seen.whole:
            self.ready_at = now
            return None, f"ready in {now - self.started:.1f}s: {seen.describe()}"
        if now - self.started > self.startup_timeout:
            return Verdict(EXIT_NOT_READY, f"not ready in {self.startup_timeout:g}s ({seen.describe()})"), None
        return None, None
