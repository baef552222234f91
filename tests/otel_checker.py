"""A structural checker of OpenTelemetry collector configs, for the tests.

No real ``otelcol-contrib`` can be had from the registries this project may use, so the tests check
every rendered config with this instead: components defined and used, listeners, scrape targets,
tokens never literal. It is no substitute for ``otelcol-contrib validate``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import yaml

from nemo_gym.orchestration.plan.telemetry import COLLECTOR_PORT_NAMES
from nemo_gym.orchestration.ports import variable
from nemo_gym.orchestration.rules import COLLECTOR_PORTS

OTLP_GRPC_PORT, OTLP_HTTP_PORT, HEALTH_PORT = COLLECTOR_PORTS
_ENV_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
# A port claimed when the job starts, as the config names it: the variable the job exports.
_CLAIMED_PORT_RE = re.compile(r"\$\{env:GYM_PORT_[A-Z0-9_]+\}")
_ENV_REF_RE = re.compile(r"\$\{env:(" + _ENV_NAME + r")(?::-[^}]*)?\}")
_SIGNALS = ("metrics", "traces", "logs")


_KNOWN_TOP = {"receivers", "processors", "exporters", "extensions", "connectors", "service"}
_METRICS_ONLY_RECEIVERS = {"prometheus"}


def _strings(node: Any, path: str = "") -> Iterable[tuple[str, str]]:
    """(path, text) for every key and string value of a parsed YAML tree."""
    if isinstance(node, dict):
        for key, value in node.items():
            sub = f"{path}::{key}" if path else str(key)
            if isinstance(key, str):
                yield sub, key
            yield from _strings(value, sub)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _strings(value, f"{path}[{i}]")
    elif isinstance(node, str):
        yield path, node


def _env_problems(doc: Any) -> list[str]:
    problems = []
    for where, text in _strings(doc):
        rest = _ENV_REF_RE.sub("", text.replace("$$", ""))
        if "$" in rest:
            problems.append(
                f"{where}: {text!r} has a '$' that is not a well-formed ${{env:NAME}} reference "
                f"(write '$$' for a literal '$')"
            )
    return problems


def _port_of(endpoint: Any) -> int | str | None:
    """An endpoint's port: a number, or the reference to a port claimed at the job's start."""
    if not isinstance(endpoint, str) or ":" not in endpoint:
        return None
    tail = endpoint.rsplit(":", 1)[1] if not endpoint.endswith("}") else endpoint[endpoint.rfind(":${") + 1 :]
    return int(tail) if tail.isdigit() else tail if _CLAIMED_PORT_RE.fullmatch(tail) else None


def _listen_problems(doc: dict[str, Any]) -> list[str]:
    problems = []
    places = ("receivers::otlp::protocols::grpc", "receivers::otlp::protocols::http", "extensions::health_check")
    claimed = ["${env:" + variable(name) + "}" for name in COLLECTOR_PORT_NAMES]
    seen: dict[int | str, str] = {}
    for where, port, claim in zip(places, COLLECTOR_PORTS, claimed):
        node: Any = doc
        for part in where.split("::"):
            node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            continue
        endpoint = node.get("endpoint") if isinstance(node, dict) else None
        got = _port_of(endpoint)
        if got not in (port, claim):
            problems.append(
                f"{where}::endpoint: {endpoint!r} must listen on port {port} (rules.COLLECTOR_PORTS), or {claim} (claimed)"
            )
        elif not str(endpoint).startswith("0.0.0.0:"):
            problems.append(f"{where}::endpoint: {endpoint!r} must bind 0.0.0.0, or other nodes cannot reach it")
        if got is not None and got in seen:
            problems.append(f"{where}::endpoint: port {got} is also used by {seen[got]}")
        if got is not None:
            seen[got] = where
    return problems


def _duration_seconds(text: Any) -> float | None:
    match = re.fullmatch(r"(\d+)(ms|s|m)", str(text))
    if not match:
        return None
    return int(match.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[match.group(2)]


def _scrape_problems(doc: dict[str, Any]) -> list[str]:
    prometheus = (doc.get("receivers") or {}).get("prometheus")
    if prometheus is None:
        return []
    configs = ((prometheus or {}).get("config") or {}).get("scrape_configs")
    if not configs:
        return ["receivers::prometheus: no scrape_configs; leave the receiver out instead"]
    problems: list[str] = []
    names: set[str] = set()
    targets: dict[str, str] = {}
    for i, sc in enumerate(configs):
        where = f"receivers::prometheus::config::scrape_configs[{i}]"
        name = sc.get("job_name")
        if not name:
            problems.append(f"{where}: job_name is missing")
        elif name in names:
            problems.append(f"{where}: job_name {name!r} is used twice")
        names.add(name)
        interval, timeout = _duration_seconds(sc.get("scrape_interval")), _duration_seconds(sc.get("scrape_timeout"))
        if interval is None or timeout is None:
            problems.append(f"{where}: scrape_interval/scrape_timeout must be durations like '15s'")
        elif timeout > interval:
            problems.append(
                f"{where}: scrape_timeout {sc['scrape_timeout']} exceeds scrape_interval {sc['scrape_interval']}"
            )
        for static in sc.get("static_configs") or []:
            for target in static.get("targets") or []:
                host, _, port = str(target).rpartition(":")
                if port.endswith("}") and ":${" in str(target):  # a port claimed at the job's start
                    host, port = str(target).rsplit(":${", 1)[0], "${" + str(target).rsplit(":${", 1)[1]
                numbered = port.isdigit() and 0 < int(port) < 65536
                if not host or not (numbered or _CLAIMED_PORT_RE.fullmatch(port)):
                    problems.append(f"{where}: target {target!r} is not host:port")
                elif target in targets:
                    problems.append(f"{where}: target {target!r} is also scraped by job {targets[target]!r}")
                else:
                    targets[target] = str(name)
                if host.startswith("${") and not re.fullmatch(r"\$\{env:" + _ENV_NAME + r"\}", host):
                    problems.append(f"{where}: target host {host!r} must be a plain ${{env:NAME}} reference")
    return problems


def _token_problems(doc: dict[str, Any], text: str, secrets: Iterable[str]) -> list[str]:
    problems = []
    for name, exporter in (doc.get("exporters") or {}).items():
        headers = (exporter or {}).get("headers") or {}
        for key, value in headers.items():
            if key.lower() == "authorization" and not re.fullmatch(r"Bearer \$\{env:" + _ENV_NAME + r"\}", str(value)):
                problems.append(
                    f"exporters::{name}::headers::{key}: must be 'Bearer ${{env:NAME}}', never a literal token"
                )
    for name, processor in (doc.get("processors") or {}).items():
        for action in (processor or {}).get("attributes") or []:
            if str(action.get("key", "")).lower() == "authorization":
                problems.append(
                    f"processors::{name}: sets an Authorization attribute; the file exports would hold the token"
                )
    for secret in secrets:
        if secret and secret in text:
            problems.append("the config holds a secret value literally; reference it as ${env:NAME}")
    return problems


def _pipeline_problems(doc: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    service = doc.get("service")
    if not isinstance(service, dict) or not isinstance(service.get("pipelines"), dict) or not service["pipelines"]:
        return ["service::pipelines: missing; the collector would do nothing"]
    used: dict[str, set[str]] = {"receivers": set(), "processors": set(), "exporters": set(), "extensions": set()}
    for ext in service.get("extensions") or []:
        used["extensions"].add(ext)
        if ext not in (doc.get("extensions") or {}):
            problems.append(f"service::extensions: {ext!r} is not defined under extensions")
    for pipeline, spec in service["pipelines"].items():
        signal = str(pipeline).split("/", 1)[0]
        where = f"service::pipelines::{pipeline}"
        if signal not in _SIGNALS:
            problems.append(f"{where}: unknown signal {signal!r}; use metrics, traces or logs")
        spec = spec or {}
        for kind in ("receivers", "processors", "exporters"):
            names = spec.get(kind) or []
            if kind != "processors" and not names:
                problems.append(f"{where}: no {kind}")
            if len(set(names)) != len(names):
                problems.append(f"{where}::{kind}: lists a component twice")
            for name in names:
                used[kind].add(name)
                if name not in (doc.get(kind) or {}):
                    problems.append(f"{where}::{kind}: {name!r} is not defined under {kind}")
                elif kind == "receivers" and name.split("/", 1)[0] in _METRICS_ONLY_RECEIVERS and signal != "metrics":
                    problems.append(f"{where}::receivers: {name!r} only produces metrics")
    for kind, names in used.items():
        for name in doc.get(kind) or {}:
            if name not in names:
                problems.append(f"{kind}::{name}: defined but used by no pipeline")
    return problems


def check_collector_config(yaml_text: str, *, secrets: Iterable[str] = ()) -> list[str]:
    """Structural problems of a collector config (empty when it looks sound).

    Checks: every component a pipeline (or service::extensions) names is defined and every
    defined one is used; prometheus feeds only metrics; every ``$`` is ``$$`` or a well-formed
    ``${env:NAME}``; otlp and health_check listen on 0.0.0.0 at ``rules.COLLECTOR_PORTS`` or at
    the ports claimed for them (``${env:GYM_PORT_OTEL_...}``); scrape jobs have unique names,
    host:port targets (the port a number or a claimed one's reference) scraped once, timeout <= interval;
    Authorization headers are ``Bearer ${env:NAME}``; none of ``secrets`` appears in the text.
    This is no substitute for ``otelcol-contrib validate``: component options are not checked.
    """
    try:
        doc = yaml.safe_load(yaml_text)
    except yaml.YAMLError as exc:
        return [f"not YAML: {str(exc).splitlines()[0]}"]
    if not isinstance(doc, dict):
        return ["the config must be a mapping"]
    problems = [f"{key}: unknown top-level section" for key in doc if key not in _KNOWN_TOP]
    problems += _pipeline_problems(doc)
    problems += _env_problems(doc)
    problems += _listen_problems(doc)
    problems += _scrape_problems(doc)
    problems += _token_problems(doc, yaml_text, secrets)
    return problems
