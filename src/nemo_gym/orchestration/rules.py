"""Value rules shared by the config models: each rejects what no user could mean.

Field validators here take ``(cls, value)`` so they can be attached with ``field_validator``;
pydantic adds the YAML path of the field, so the messages say only what is wrong and what to do.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Callable, Iterable
from typing import Any

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
BENCHMARK_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")
ENV_VAR_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# A host as it goes between ``http://`` and ``:port``: a name or IPv4 address, or [IPv6].
# ``${oc.env:VAR}``, OmegaConf's read of the environment, as NeMo Gym 0.7.0 writes policy_host.
OC_ENV_RE = re.compile(r"\$\{oc\.env:([A-Za-z_][A-Za-z0-9_]*)\}")
HOST_RE = re.compile(r"^([A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_])?|\[[0-9A-Fa-f:.]+\])\Z")

# Ports the OTel collector listens on beside the driver (OTLP gRPC, OTLP HTTP, health).
COLLECTOR_PORTS = (4317, 4318, 13133)
# vllm-router's Prometheus port (its own default); the Nth router on the driver's node takes +N.
ROUTER_METRICS_PORT = 29000


def is_integer(v: Any) -> bool:
    """An int that is not a bool (``true`` in YAML or JSON is no count and no index)."""
    return isinstance(v, int) and not isinstance(v, bool)


def positive(cls: Any, v: int) -> int:
    if v < 1:
        raise ValueError(f"must be >= 1, got {v}")
    return v


def optional_positive(cls: Any, v: int | None) -> int | None:
    if v is not None and (isinstance(v, bool) or v < 1):
        raise ValueError(f"must be a whole number >= 1 (or null: no limit), got {v!r}")
    return v


def optional_positive_number(cls: Any, v: float | None) -> float | None:
    if v is not None and (isinstance(v, bool) or not math.isfinite(v) or v <= 0):
        raise ValueError(f"must be a number > 0 (or null: no limit), got {v!r}")
    return v


def optional_non_negative(cls: Any, v: int | None) -> int | None:
    if v is not None and v < 0:
        raise ValueError(f"must be >= 0, got {v}")
    return v


STEP_MAX = 2**63 - 1  # a training step is an int64 where it is logged (MLflow's step, W&B's)


def optional_step(cls: Any, v: int | None) -> int | None:
    if v is not None and not 0 <= v <= STEP_MAX:
        raise ValueError(f"must be from 0 to {STEP_MAX} (a step is an int64 where it is logged), got {v}")
    return v


# A run's tags: words a history is selected by (gym eval history --tag), stored as one delimited
# text column; the comma is the delimiter, so no tag holds one.
TAG_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:=+/-]{0,63}")
TAGS_MAX = 16


def tags(cls: Any, v: list[str]) -> list[str]:
    if len(v) > TAGS_MAX:
        raise ValueError(f"at most {TAGS_MAX} tags, got {len(v)}")
    for i, tag in enumerate(v):
        if not TAG_RE.fullmatch(tag):
            raise ValueError(
                f"tag {i} ({tag[:80]!r}) must be 1-64 letters, digits or . _ : = + / - (no spaces or commas), "
                "starting with a letter or digit"
            )
    return list(dict.fromkeys(v))  # each once, in the order given


def not_a_bool(cls: Any, v: Any) -> Any:
    """A count given as true/false is a mistake (YAML's true is not 1 shard): refused before pydantic
    would read it as 1."""
    if isinstance(v, bool):
        raise ValueError(f"must be a whole number, not {str(v).lower()}")
    return v


def optional_gpus(cls: Any, v: int | None) -> int | None:
    if v is not None and v < 1:
        raise ValueError(f"must be >= 1, got {v}; leave gpus_per_node unset for nodes without GPUs")
    return v


def port(cls: Any, v: int) -> int:
    if not 1 <= v <= 65535:
        raise ValueError(f"{v} is not a TCP port; use a number from 1 to 65535")
    return v


def side_channel_port(cls: Any, v: int) -> int:
    """The prefill tier's NIXL side-channel port; the decode tier's is the next one."""
    if not 1 <= v <= 65534:
        raise ValueError(f"{v} leaves no TCP port for the decode tier (it uses this + 1); use 1 to 65534")
    return v


def optional_port(cls: Any, v: int | None) -> int | None:
    return v if v is None else port(cls, v)


def single_line_nonempty(cls: Any, v: str) -> str:
    if not v.strip():
        raise ValueError("is empty; give a value")
    if "\n" in v or "\r" in v:
        raise ValueError("contains a line break; write it on one line")
    return v


def not_an_option(cls: Any, v: str | None) -> str | None:
    """A value passed as a command's argument (vLLM's model, its served name): one that starts with
    '-' would be read as an option instead."""
    if v is not None and v.startswith("-"):
        raise ValueError(f"{v!r} starts with '-', which vLLM would read as an option; write it without the dash")
    return v


def shell_words(cls: Any, v: str) -> str:
    """Extra arguments are split like a shell command line, then passed as separate arguments."""
    try:
        shlex.split(v)
    except ValueError as exc:
        raise ValueError(f"{v!r} cannot be split into arguments ({exc}); balance its quotes") from None
    return v


# What one Slurm job (one component) takes a single value of for its whole allocation.
ALLOCATION_FIELDS = ("partition", "ntasks_per_node", "gpus_per_node", "extra_args")


def pools_differ(pools: dict[str, Any]) -> bool:
    """Pools that disagree on what an allocation takes one value of make a heterogeneous job."""
    shapes = {tuple(repr(getattr(pool, field)) for field in ALLOCATION_FIELDS) for pool in pools.values()}
    return len(shapes) > 1


def disagreement(pools: dict[str, Any]) -> str:
    """``partition (a='x', b='y')``: what the pools differ on, for messages."""
    for field in ALLOCATION_FIELDS:
        values = {name: getattr(pool, field) for name, pool in pools.items()}
        if len({repr(v) for v in values.values()}) > 1:
            return f"{field} ({', '.join(f'{n}={v!r}' for n, v in values.items())})"
    return "nothing"


def non_negative(cls: Any, v: int) -> int:
    if v < 0:
        raise ValueError(f"must be >= 0, got {v}")
    return v


def optional_hostname(cls: Any, v: str | None) -> str | None:
    if v is not None and (not v or any(c.isspace() for c in v) or v.startswith("-")):
        raise ValueError(f"{v!r} is not a host name; use the login node's name or an ssh alias")
    return v


def host(cls: Any, v: str) -> str:
    """A bare host for a URL the job builds (``http://<host>:<port>/v1``): no scheme, port or path;
    or ``runtime:VAR``, a host known only on the node, read there from VAR."""
    if HOST_RE.match(v):
        return v
    if v.startswith("runtime:"):
        if ENV_VAR_NAME_RE.fullmatch(v[len("runtime:") :]):
            return v
        raise ValueError(
            f"{v!r}: after 'runtime:' give the variable that holds the host on the node, e.g. runtime:HEAD_NODE_IP"
        )
    node_variable = OC_ENV_RE.fullmatch(v)
    if node_variable:
        # Composition turns this into runtime:VAR; a config validated at the Python API skips that.
        var = node_variable.group(1)
        raise ValueError(
            f"{v!r} is an interpolation nothing resolves here (gym eval submit makes it runtime:{var}); "
            f"write 'runtime:{var}' to read {var} on the driver's node"
        )
    if "://" in v:
        bare = v.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[0]
        raise ValueError(f"{v!r} is a URL; give only the host, e.g. {bare!r} (the scheme and port are added)")
    if not v.strip():
        raise ValueError("is empty; give a host name or IP address, e.g. 'localhost'")
    raise ValueError(
        f"{v!r} is not a host name; give a name or IP address without spaces, port or path, e.g. 'localhost'"
    )


def word(cls: Any, v: str) -> str:
    """A value passed to a program as one argument of its own (a policy, a log level, a class name)."""
    if not v or any(c.isspace() for c in v):
        raise ValueError(f"{v!r} is not a single word; write it without spaces")
    return v


def single_line(cls: Any, v: str) -> str:
    if "\n" in v or "\r" in v:
        raise ValueError("contains a line break; write it on one line")
    return v


def absolute_path(cls: Any, v: str) -> str:
    if not v.startswith("/"):
        raise ValueError(f"{v!r} is not an absolute path; give the full path, e.g. /scratch/you/gym-runs")
    return single_line_nonempty(cls, v)


def mount_list(cls: Any, v: list[str]) -> list[str]:
    for mount in v:
        parts = mount.split(":")
        if len(parts) > 3 or not parts[0] or any(not p for p in parts[1:]):
            raise ValueError(f"{mount!r} is not a mount; write 'SRC', 'SRC:DST' or 'SRC:DST:FLAGS'")
        for path in parts[:2]:
            if not path.startswith("/"):
                raise ValueError(f"{mount!r}: {path!r} is not an absolute path; mounts need absolute paths")
        if "\n" in mount or "," in mount:
            raise ValueError(f"{mount!r}: a mount cannot contain a comma or a line break")
    return v


def named_entries(kind: str) -> Callable[[Any, dict[str, Any]], dict[str, Any]]:
    """Names that become file names and shell variable suffixes in the job."""

    def check(cls: Any, v: dict[str, Any]) -> dict[str, Any]:
        for name in v:
            if not NAME_RE.match(name):
                raise ValueError(
                    f"{kind} name {name!r} cannot be used in file names; use letters, digits, '.', '_' "
                    f"and '-', starting with a letter or digit"
                )
        return v

    return check


def benchmark_names(cls: Any, v: dict[str, Any]) -> dict[str, Any]:
    if not v:
        raise ValueError("no benchmark is declared; add at least one, e.g. benchmarks: {answer-judge: {}}")
    for name in v:
        if not BENCHMARK_NAME_RE.match(name) or name in (".", ".."):
            raise ValueError(
                f"benchmark name {name!r} cannot be a directory name; use letters, digits, '.', '_' and '-'"
            )
    return v


def env_keys(cls: Any, env: dict[str, str]) -> None:
    for key in env:
        if not ENV_VAR_NAME_RE.match(key):
            raise ValueError(
                f"{key!r} is not a valid environment variable name; use letters, digits and "
                f"underscores, not starting with a digit"
            )


def literal_credentials(env: dict[str, str], credentials: Iterable[str]) -> list[str]:
    """The credentials written as ``lit:``: the spec and NeMo Gym 0.7.0 accept them, so we do, with
    a warning each, and carry them as ``host:`` values are (never written, never printed)."""
    return [key for key in credentials if str(env.get(key, "")).startswith("lit:")]


def literal_credential_warning(key: str) -> str:
    return (
        f"{key} is a credential written as a literal (lit:); it is kept out of every file gym writes and every "
        f"line it prints, but it is in your config file: prefer host:{key} with {key} exported in the submitting "
        f"shell (a resubmit reads it from ${key})"
    )


# --------------------------------------------------------------------------------------------
# cross-service rules


def _scopes(service: Any, pool_names: list[str], driver_pool: str) -> Iterable[str]:
    """Node pools on which the service listens on its ``port`` ('*' when there are no pools)."""
    if not pool_names:
        return ["*"]
    if getattr(service, "type", None) == "ray":
        return [driver_pool]  # only the head listens on the GCS port
    if getattr(service, "type", None) == "vllm_pd":
        return [driver_pool]  # the router runs beside the driver (its pool is checked to be that one)
    if service.node_pool is not None:
        return [service.node_pool]
    return pool_names


def driver_pool_name(services: dict[str, Any], policy_model: str | None, pool_names: list[str]) -> str:
    """The pool holding the driver's node: the policy service's pool when pinned, else the first."""
    policy = services.get(policy_model) if policy_model else None
    pinned = getattr(policy, "node_pool", None)
    if pinned:
        return pinned
    return pool_names[0] if pool_names else "*"


def check_port_clashes(
    services: dict[str, Any],
    pool_names: list[str],
    policy_model: str | None,
    otel_enabled: bool,
    paths: dict[str, str] | None = None,
) -> None:
    """``services`` as deployed (prefill/decode tiers included); ``paths`` gives the YAML path of
    a service whose path is not ``services.<name>`` (a tier's is ``services.<pd>.prefill``)."""
    paths = paths or {}

    def port_key(name: str) -> str:
        return f"{paths.get(name, f'services.{name}')}.port"

    driver_pool = driver_pool_name(services, policy_model, pool_names)
    taken: dict[tuple[str, int], str] = {}
    if otel_enabled:
        for p in COLLECTOR_PORTS:
            taken[(driver_pool, p)] = "the OTel collector"
    routers = [name for name, service in services.items() if getattr(service, "type", None) == "vllm_pd"]
    for i, router in enumerate(routers):
        taken[(driver_pool, ROUTER_METRICS_PORT + i)] = f"the metrics of {router}'s vllm-router"
    for name, service in services.items():
        for scope in _scopes(service, pool_names, driver_pool):
            key = (scope, service.port)
            if key in taken:
                where = "on the same node" if scope == "*" else f"on node pool '{scope}'"
                other = taken[key]
                owner = other if other.startswith("the ") else port_key(other)
                raise ValueError(
                    f"{port_key(name)} and {owner} both use port {service.port} {where}; "
                    f"give {port_key(name)} another value"
                )
            taken[key] = name


# The most shards a benchmark may run in: one Slurm array of them at the default MaxArraySize.
MAX_SHARDS = 1000


def optional_shards(cls: Any, value: int | None) -> int | None:
    if value is None:
        return value
    if isinstance(value, bool) or not 1 <= value <= MAX_SHARDS:
        raise ValueError(f"must be a whole number from 1 to {MAX_SHARDS} (1: not sharded), got {value!r}")
    return value
