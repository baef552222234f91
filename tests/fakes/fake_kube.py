"""An emulated Kubernetes API server that the real `kubectl` talks to, and a fake kubelet that runs Jobs here.

No real API server can exist on this machine, so the Kubernetes backend is tested against:

- `FakeKube`: a kmock `KubernetesEmulator` taught enough of the real API server for kubectl 1.27..1.33 (the
  GKE dispatcher at /usr/bin/kubectl execs `kubectl.1.<minor>` from our `/version`): discovery, OpenAPI v3
  stubs (so the default `kubectl apply` validates server-side), typed lists, label/field selectors, JSON
  watches (`kubectl wait`, `--watch`), merge / strategic-merge / JSON patches, server-side apply, status
  subresource, pod logs (`-c`, `--tail`, `-f`, `--previous`), foreground/background/orphan cascades, real
  error reasons (`NotFound`, `AlreadyExists`, `Invalid`, `BadRequest`), Job template immutability, and
  schema validation of what is created with kubernetes-validate for the served minor (strict when kubectl asks
  for `fieldValidation=Strict`, its default) plus the Job/Pod rules the schema cannot say.
- `FakeKubeThread`: runs it on 127.0.0.1 in a background thread (`kubeconfig()`, `call(fn)`).
- `FakeKubelet`: a job controller plus kubelet plus "container runtime" in one thread. Images are ignored: each
  container's `command` + `args` runs as a local process group (env = ours minus KUBECONFIG, plus the
  container's), native sidecars in order behind their startup probes, then the `driver`; its exit decides
  the pod and the Job (conditions as the served minor would write them).
- `running_fake_kube(tmp_path, minor=...)`: all three, plus a kubeconfig and a kubectl cache dir under tmp_path.

Everything the kubelet starts is killed when it stops (also at interpreter exit, as a last resort).
"""

from __future__ import annotations

import asyncio
import atexit
import codecs
import contextlib
import copy
import datetime
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
import uuid
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import attrs
import kmock

try:  # the test extra has it; without it the fake accepts whatever the schema would have refused
    import kubernetes_validate
except ImportError:  # pragma: no cover
    kubernetes_validate = None

try:
    import jsonpatch  # a dependency of kmock
except ImportError:  # pragma: no cover
    jsonpatch = None

JOBS = kmock.resource("batch", "v1", "jobs")
PODS = kmock.resource("", "v1", "pods")
PVCS = kmock.resource("", "v1", "persistentvolumeclaims")

# What the Job controller puts on the pods it makes (and removes once it has counted a finished pod).
JOB_TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
# The API server's suffix alphabet for generateName (no vowels: no words).
_NAME_SUFFIX_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def now_rfc3339() -> str:
    return datetime.datetime.now(tz=datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str) -> float:
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=datetime.timezone.utc).timestamp()


# -- selectors -------------------------------------------------------------------------------------------------

_SELECTOR_TERM = re.compile(
    r"^\s*(?P<neg>!)?\s*(?P<key>[^\s!=,()]+)\s*"
    r"(?:(?P<setop>in|notin)\s*\((?P<values>[^)]*)\)|(?P<op>==|=|!=)\s*(?P<value>[^\s,]*))?\s*$"
)


def _split_terms(selector: str) -> list[str]:
    terms, depth, cur = [], 0, ""
    for ch in selector:
        if ch == "," and depth == 0:
            terms.append(cur)
            cur = ""
            continue
        depth += {"(": 1, ")": -1}.get(ch, 0)
        cur += ch
    terms.append(cur)
    return [t for t in terms if t.strip()]


def match_labels(labels: dict[str, str], selector: str) -> bool:
    """Kubernetes label selector semantics: a=b, a==b, a!=b, a, !a, a in (x,y), a notin (x,y); comma = AND."""
    for term in _split_terms(selector):
        m = _SELECTOR_TERM.match(term)
        if not m:
            raise ValueError(f"unable to parse requirement: {term!r}")
        key, neg = m["key"], bool(m["neg"])
        if m["setop"]:
            values = {v.strip() for v in m["values"].split(",") if v.strip()}
            inside = key in labels and labels[key] in values
            if inside != (m["setop"] == "in"):
                return False
        elif m["op"]:
            equal = labels.get(key) == m["value"]
            if equal != (m["op"] != "!="):
                return False
        elif (key in labels) == neg:
            return False
    return True


def match_fields(obj: dict[str, Any], selector: str) -> bool:
    for term in _split_terms(selector):
        negate = "!=" in term
        key, value = re.split(r"!=|==|=", term, maxsplit=1)
        cur: Any = obj
        for part in key.strip().split("."):
            cur = cur.get(part) if isinstance(cur, dict) else None
        if (str(cur if cur is not None else "") == value.strip()) == negate:
            return False
    return True


# -- patches ---------------------------------------------------------------------------------------------------


def merge_patch(orig: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (`kubectl patch --type=merge`): dicts merge, null deletes, the rest replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(orig) if isinstance(orig, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# Strategic merge keys of the fields a Job or Pod is made of (everything else merges by `name` if it can).
_MERGE_KEYS = {
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "ports": "containerPort",
    "conditions": "type",
    "tolerations": None,
    "topologySpreadConstraints": "topologyKey",
    "finalizers": None,
}


def _strip_directives(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_directives(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip_directives(v) for v in value]
    return value


def strategic_merge_patch(orig: Any, patch: Any) -> Any:
    """Enough of the strategic merge patch for `kubectl apply`/`patch` of Jobs, Pods, PVCs and ConfigMaps."""
    if not isinstance(patch, dict) or not isinstance(orig, dict):
        return _strip_directives(patch)
    if patch.get("$patch") == "replace":
        return _strip_directives(patch)
    out = copy.deepcopy(orig)
    for key, value in patch.items():
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            out[name] = [x for x in out.get(name) or [] if x not in value]
        elif key.startswith("$"):
            continue
        elif value is None or (isinstance(value, dict) and value.get("$patch") == "delete"):
            out.pop(key, None)
        elif isinstance(value, dict):
            out[key] = strategic_merge_patch(out.get(key), value)
        elif isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = _merge_list(key, out[key], value)
        else:
            out[key] = _strip_directives(value)
    if isinstance(patch.get("$retainKeys"), list):
        out = {k: v for k, v in out.items() if k in patch["$retainKeys"]}
    return out


def _merge_list(field_name: str, cur: list[Any], patch: list[Any]) -> list[Any]:
    merge_key = _MERGE_KEYS.get(field_name, "name")
    items = [p for p in patch if not (isinstance(p, dict) and set(p) == {"$patch"})]
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return _strip_directives(items)
    if merge_key is None or not all(isinstance(x, dict) and merge_key in x for x in [*cur, *items]):
        return _strip_directives(items)
    out = copy.deepcopy(cur)
    for item in items:
        idx = next((i for i, x in enumerate(out) if x[merge_key] == item[merge_key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                del out[idx]
        elif idx is None:
            out.append(_strip_directives(item))
        else:
            out[idx] = strategic_merge_patch(out[idx], item)
    return out


# -- validation ------------------------------------------------------------------------------------------------

_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


ADMISSION = "policy.example.com"


@attrs.frozen
class ApiError(kmock.KubernetesError):
    """An error with the API server's own reason and message (kubectl prints `Error from server (REASON): MSG`)."""


def _invalid(kind: str, group: str, name: str, causes: list[str]) -> ApiError:
    qualified = f"{kind}.{group}" if group else kind
    return ApiError(
        status=422,
        reason="Invalid",
        message=f'{qualified} "{name}" is invalid: '
        + ("[" + ", ".join(causes) + "]" if len(causes) > 1 else causes[0]),
        details={"name": name, "group": group, "kind": kind, "causes": [_cause(c) for c in causes]},
    )


def _cause(text: str) -> dict[str, str]:
    """'spec.x: Invalid value: ...' as a StatusCause (kubectl prints `The Job "n" is invalid: FIELD: MESSAGE`)."""
    field_path, _, message = text.partition(": ")
    kind = message.split(":", 1)[0]
    reason = {"Required value": "FieldValueRequired", "Duplicate value": "FieldValueDuplicate"}.get(kind, "")
    reason = reason or {"Not found": "FieldValueNotFound", "Forbidden": "FieldValueForbidden"}.get(kind, "")
    reason = reason or ("FieldValueNotSupported" if kind == "Unsupported value" else "FieldValueInvalid")
    return {"reason": reason, "message": message, "field": field_path}


def _check_labels(path: str, labels: Any) -> list[str]:
    errors = []
    for key, value in (labels or {}).items():
        prefix, _, name = key.rpartition("/")
        if (prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))) or len(name) > 63:
            errors.append(f'{path}: Invalid value: "{key}": name part must be no more than 63 characters')
        elif not _LABEL_NAME.match(name):
            errors.append(f'{path}: Invalid value: "{key}": name part must consist of alphanumeric characters')
        if not isinstance(value, str):
            continue
        if len(value) > 63:
            errors.append(f'{path}: Invalid value: "{value}": must be no more than 63 characters')
        elif value and not _LABEL_NAME.match(value):
            errors.append(f'{path}: Invalid value: "{value}": {_LABEL_VALUE_MSG}')
    return errors


def _check_pod_spec(path: str, spec: dict[str, Any], for_job: bool, has_pfp: bool) -> list[str]:
    """What the API server refuses in a pod (template) spec beyond the schema: the rules a backend can break."""
    errors: list[str] = []
    policy = spec.get("restartPolicy") or "Always"
    if for_job and policy not in ("Never", "OnFailure"):
        errors.append(f'{path}.restartPolicy: Unsupported value: "{policy}": supported values: "OnFailure", "Never"')
    if has_pfp and policy != "Never":
        errors.append(
            f'{path}.restartPolicy: Invalid value: "{policy}": only "Never" is supported when podFailurePolicy is '
            "specified"
        )
    if not spec.get("containers"):
        errors.append(f"{path}.containers: Required value")
    seen: set[str] = set()
    volumes = {v.get("name") for v in spec.get("volumes") or []}
    for kind in ("initContainers", "containers"):
        for i, ctr in enumerate(spec.get(kind) or []):
            where = f"{path}.{kind}[{i}]"
            name = ctr.get("name") or ""
            if not name:
                errors.append(f"{where}.name: Required value")
            elif not _DNS_LABEL.match(name) or len(name) > 63:
                errors.append(f'{where}.name: Invalid value: "{name}": a lowercase RFC 1123 label must consist of')
            elif name in seen:
                errors.append(f'{where}.name: Duplicate value: "{name}"')
            seen.add(name)
            if not ctr.get("image"):
                errors.append(f"{where}.image: Required value")
            sidecar = kind == "initContainers" and ctr.get("restartPolicy") == "Always"
            if "restartPolicy" in ctr and kind == "containers":
                errors.append(f"{where}.restartPolicy: Forbidden: may not be set for non-init containers")
            elif "restartPolicy" in ctr and not sidecar:
                errors.append(
                    f'{where}.restartPolicy: Unsupported value: "{ctr["restartPolicy"]}": supported values: "Always"'
                )
            for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
                if probe in ctr and kind == "initContainers" and not sidecar:
                    errors.append(
                        f"{where}.{probe}: Forbidden: may not be set for init containers without restartPolicy=Always"
                    )
            for j, env in enumerate(ctr.get("env") or []):
                if not _ENV_NAME.match(env.get("name") or ""):
                    errors.append(
                        f"{where}.env[{j}].name: Invalid value: \"{env.get('name')}\": a valid environment variable name must consist of alphabetic characters, digits, '_', '-', or '.', and must not start with a digit"
                    )
            for j, mount in enumerate(ctr.get("volumeMounts") or []):
                if mount.get("name") not in volumes:
                    errors.append(f'{where}.volumeMounts[{j}].name: Not found: "{mount.get("name")}"')
    return errors


def _schema_error(exc: Any, obj: dict[str, Any], strict: bool) -> ApiError:
    """A kubernetes-validate error as the API server would word it."""
    kind = obj.get("kind", "Object")
    path = ""
    for part in exc.path:
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    if exc.validator == "additionalProperties" and strict:
        unknown = re.findall(r"'([^']+)'", exc.message.split("(", 1)[-1])
        fields = ", ".join(f'unknown field "{path + "." if path else ""}{u}"' for u in unknown)
        return ApiError(
            status=400,
            reason="BadRequest",
            message=f'{kind} in version "{obj.get("apiVersion", "v1").split("/")[-1]}" cannot be handled as a {kind}: '
            f"strict decoding error: {fields}",
        )
    if exc.validator == "type":
        return ApiError(
            status=400,
            reason="BadRequest",
            message=f'{kind} in version "{obj.get("apiVersion", "v1").split("/")[-1]}" cannot be handled as a {kind}: '
            f"json: cannot unmarshal {path}: {exc.message}",
        )
    group = obj.get("apiVersion", "").split("/")[0] if "/" in obj.get("apiVersion", "") else ""
    return _invalid(kind, group, obj.get("metadata", {}).get("name", ""), [f"{path}: Invalid value: {exc.message}"])


# -- the emulated API server -----------------------------------------------------------------------------------


def _openapi_gv(group: str, version: str, kinds: list[tuple[str, str]]) -> dict[str, Any]:
    """A minimal OpenAPI v3 GV document: it tells kubectl that PATCH takes ?fieldValidation (so the default
    `kubectl apply` leaves validation to the server instead of failing to download the schema)."""
    prefix = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    paths = {}
    for plural, kind in kinds:
        gvk = {"group": group, "version": version, "kind": kind}
        op = {
            "x-kubernetes-group-version-kind": gvk,
            "parameters": [{"name": "fieldValidation", "in": "query", "schema": {"type": "string"}}],
            "responses": {"200": {"description": "OK"}},
        }
        paths[f"{prefix}/namespaces/{{namespace}}/{plural}/{{name}}"] = {"patch": op}
        paths[f"{prefix}/namespaces/{{namespace}}/{plural}"] = {"post": op}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": "unversioned"}, "paths": paths}


def _header(request: kmock.Request, name: str) -> str:
    return next((v for k, v in request.headers.items() if k.lower() == name.lower()), "")


class FakeKube(kmock.KubernetesEmulator):
    """kmock's in-memory API server, taught what the real kubectl and the Kubernetes backend rely on.

    Knobs (plain attributes): `server_minor` ("29": `/version` answers v1.29.0, which picks kubectl 1.29),
    `validate` (True: kubernetes-validate schema + API-server rules on create/update), `deny` (a site's
    admission policy: object -> why it is refused, or None).
    State for the fake kubelet: `pod_logs[(ns, pod, container)]` (current instance), `previous_logs[...]`
    (the instance before its last restart), `closed_logs` (keys whose writer is gone: ends `logs -f`),
    `waiting[(ns, pod, container)]` (why a container has no log yet), `has_kubelet`.
    """

    server_minor = "29"
    validate = True
    # A site's admission policy: given an object about to be created, why it is refused (None: admitted).
    deny: Callable[[dict[str, Any]], str | None] | None = None

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # importlib.resources.read_binary in kmock 0.8
            self.resources.load_bundled()
        self.pod_logs: dict[tuple[str, str, str], str] = {}
        self.previous_logs: dict[tuple[str, str, str], str] = {}
        self.closed_logs: set[tuple[str, str, str]] = set()
        self.waiting: dict[tuple[str, str, str], str] = {}
        self.has_kubelet = False
        self._rv = 1
        self._events: list[tuple[kmock.resource, dict[str, Any]]] = []
        self.closing = asyncio.Event()  # set when the server stops: open watches and `logs -f` end
        self._install_openapi()

    def _install_openapi(self) -> None:
        core = [("pods", "Pod"), ("persistentvolumeclaims", "PersistentVolumeClaim"), ("configmaps", "ConfigMap")]
        core += [("secrets", "Secret"), ("services", "Service"), ("serviceaccounts", "ServiceAccount")]
        gvs = {
            "api/v1": _openapi_gv("", "v1", core),
            "apis/batch/v1": _openapi_gv("batch", "v1", [("jobs", "Job")]),
        }
        self["get /openapi/v3"] << {"paths": {gv: {"serverRelativeURL": f"/openapi/v3/{gv}?hash=0"} for gv in gvs}}
        for gv, doc in gvs.items():
            self[f"get /openapi/v3/{gv}"] << doc
        # Every namespace exists (kubectl asks after a 404, to say which of the two was not found).
        self["get", re.compile(r"^/api/v1/namespaces/[^/]+$")] << self._serve_namespace

    @staticmethod
    def _serve_namespace(request: kmock.Request) -> dict[str, Any]:
        name = request.url.path.rstrip("/").rsplit("/", 1)[-1]
        meta = {"name": name, "labels": {"kubernetes.io/metadata.name": name}}
        spec = {"finalizers": ["kubernetes"]}
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta, "spec": spec, "status": {"phase": "Active"}}

    # -- helpers for the kubelet (call them under the lock: through FakeKubeThread.call) -------------------

    def next_resource_version(self) -> str:
        self._rv += 1
        return str(self._rv)

    def get_raw(self, res: Any, ns: str, name: str) -> dict[str, Any] | None:
        key = (kmock.resource(res), ns, name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        return copy.deepcopy(self.objects[key].raw)

    def list_raw(self, res: Any, ns: str | None = None) -> list[dict[str, Any]]:
        res = kmock.resource(res)
        return [
            copy.deepcopy(obj.raw)
            for (r, n, _), obj in list(self.objects.items())
            if r == res and (ns is None or n == ns) and not obj.deleted
        ]

    def put_object(self, res: Any, ns: str, name: str, obj: dict[str, Any], event: str = "ADDED") -> None:
        """Store `obj` as the object's new state (creating it if need be) and tell the watchers."""
        res = kmock.resource(res)
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = self.next_resource_version()
        key = (res, ns, name)
        if key in self.objects and not self.objects[key].deleted:
            self.objects[key].history.append(obj)
            del self.objects[key].history[:-1]  # no need for the history: keep memory flat
            event = "MODIFIED" if event == "ADDED" else event
        else:
            self.objects[key] = obj
        self._events.append((res, {"type": event, "object": copy.deepcopy(obj)}))

    def patch_object(self, res: Any, ns: str, name: str, patch: dict[str, Any]) -> bool:
        """JSON-merge-patch the object (None deletes a key); False if it is gone. No change, no event."""
        old = self.get_raw(res, ns, name)
        if old is None:
            return False
        new = merge_patch(old, patch)
        if new != old:
            self.put_object(res, ns, name, new, event="MODIFIED")
        return True

    def remove_object(self, res: Any, ns: str, name: str) -> None:
        res = kmock.resource(res)
        key = (res, ns, name)
        if key in self.objects and not self.objects[key].deleted:
            last = copy.deepcopy(self.objects[key].raw)
            self.objects[key].delete()
            del self.objects[key].history[:-2]
            self._events.append((res, {"type": "DELETED", "object": last}))

    async def flush_events(self) -> None:
        while self._events:
            res, event = self._events.pop(0)
            await self._buses[res].put(event)

    # -- request handling --------------------------------------------------------------------------------

    def _qualified(self, res: Any) -> str:
        return f"{res.plural}.{res.group}" if res.group else res.plural

    async def _handle(self, request: kmock.Request) -> Any:
        res = request.resource
        try:
            if res is not None and request.action == kmock.action.UPDATE and request.name is not None:
                return await self._handle_update(request)
            if res is not None and request.action == kmock.action.CREATE:
                request = self._admit_create(request)
            propagation = self._propagation(request)
            if res == JOBS and request.action == kmock.action.DELETE and request.name is not None:
                await self._before_job_delete(request, propagation)
            out = await super()._handle(request)
            if res == JOBS and request.action == kmock.action.DELETE and request.name is not None:
                async with self._lock:
                    if propagation != "Orphan":
                        self._cascade(request.namespace or "", request.name)
            return out
        except kmock.KubernetesObjectNotFoundError:
            name = request.name or ""
            raise ApiError(
                status=404,
                reason="NotFound",
                message=f'{self._qualified(res)} "{name}" not found' if res else "the server could not find it",
                details={"name": name, "group": res.group if res else "", "kind": res.plural if res else ""},
            ) from None
        except kmock.KubernetesError as exc:
            if exc.status != 409 or isinstance(exc, ApiError):
                raise
            name = ((request.data or {}).get("metadata") or {}).get("name", "")
            raise ApiError(
                status=409,
                reason="AlreadyExists",
                message=f'{self._qualified(res)} "{name}" already exists',
                details={"name": name, "group": res.group if res else "", "kind": res.plural if res else ""},
            ) from None
        finally:
            await self.flush_events()

    @staticmethod
    def _propagation(request: kmock.Request) -> str:
        data = request.data if isinstance(request.data, dict) else {}
        policy = data.get("propagationPolicy") or request.params.get("propagationPolicy")
        if not policy and data.get("orphanDependents") is True:
            policy = "Orphan"
        return policy or "Background"

    def _validate(self, obj: dict[str, Any], strict: bool) -> None:
        if not self.validate:
            return
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        name = meta.get("name") or ""
        group = obj.get("apiVersion", "").split("/")[0] if "/" in obj.get("apiVersion", "") else ""
        causes = []
        if not name:
            causes.append("metadata.name: Required value: name or generateName is required")
        elif len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
            causes.append(
                f'metadata.name: Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case '
                "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character"
            )
        causes += _check_labels("metadata.labels", meta.get("labels"))
        if kind == "Job":
            spec = obj.get("spec") or {}
            if len(name) > 63:
                causes.append(f'metadata.name: Invalid value: "{name}": must be no more than 63 characters')
            template = spec.get("template") or {}
            causes += _check_labels("spec.template.labels", (template.get("metadata") or {}).get("labels"))
            causes += _check_pod_spec(
                "spec.template.spec", template.get("spec") or {}, True, bool(spec.get("podFailurePolicy"))
            )
        elif kind == "Pod":
            causes += _check_pod_spec("spec", obj.get("spec") or {}, False, False)
        if causes:
            raise _invalid(kind or "", group, name, causes)
        if kubernetes_validate is None:
            return
        try:
            kubernetes_validate.validate(obj, f"1.{self.server_minor}", strict=strict)
        except kubernetes_validate.ValidationError as exc:
            raise _schema_error(exc, obj, strict) from None
        except Exception:  # an unknown kind or version: the server has no opinion here
            pass

    def _defaulted(self, res: Any, ns: str | None, obj: dict[str, Any]) -> dict[str, Any]:
        """What the real API server fills in on create (the parts a client may read back)."""
        meta = obj.setdefault("metadata", {})
        if ns and self.resources[res].namespaced is not False:
            meta["namespace"] = ns
        uid = str(uuid.uuid4())
        meta.update(uid=uid, creationTimestamp=now_rfc3339(), resourceVersion=self.next_resource_version())
        meta["generation"] = 1
        name = meta.get("name", "")
        if res == JOBS:
            spec = obj.setdefault("spec", {})
            for key, value in (("parallelism", 1), ("completions", 1), ("backoffLimit", 6), ("suspend", False)):
                spec.setdefault(key, value)
            spec.setdefault("completionMode", "NonIndexed")
            if int(self.server_minor) >= 29:
                spec.setdefault(
                    "podReplacementPolicy", "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
                )
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            labels = spec.setdefault("template", {}).setdefault("metadata", {}).setdefault("labels", {})
            labels.update(
                {
                    "batch.kubernetes.io/controller-uid": uid,
                    "controller-uid": uid,
                    "batch.kubernetes.io/job-name": name,
                    "job-name": name,
                }
            )
            spec["template"].setdefault("spec", {}).setdefault("terminationGracePeriodSeconds", 30)
            obj["status"] = {}
        elif res == PVCS:
            obj["status"] = {"phase": "Bound", "accessModes": (obj.get("spec") or {}).get("accessModes", [])}
        elif res == PODS:
            obj["status"] = {"phase": "Pending", "qosClass": "BestEffort"}
        return obj

    def _admit_create(self, request: kmock.Request) -> kmock.Request:
        data = request.data
        if not isinstance(data, dict):
            raise ApiError(status=400, reason="BadRequest", message="the body of the request was in an unknown format")
        self._validate(data, strict=request.params.get("fieldValidation", "Strict") == "Strict")
        why = self.deny(data) if self.deny is not None else None
        if why:  # as a validating admission webhook refuses (a site's policy)
            raise ApiError(
                status=403, reason="Forbidden", message=f'admission webhook "{ADMISSION}" denied the request: {why}'
            )
        if request.params.get("dryRun"):
            raise ApiError(status=400, reason="BadRequest", message="the fake API server does not do dry runs")
        obj = self._defaulted(request.resource, request.namespace, copy.deepcopy(data))
        data.clear()  # in place: kmock matches its reactions to requests by identity
        data.update(obj)
        return request

    async def _before_job_delete(self, request: kmock.Request, propagation: str) -> None:
        if propagation != "Foreground" or not self.has_kubelet:
            return
        async with self._lock:
            job = self.get_raw(JOBS, request.namespace or "", request.name or "")
            if job is None or job["metadata"].get("deletionTimestamp"):
                return
            finalizers = list(job["metadata"].get("finalizers") or [])
            if "foregroundDeletion" not in finalizers:
                self.patch_object(
                    JOBS,
                    job["metadata"]["namespace"],
                    job["metadata"]["name"],
                    {"metadata": {"finalizers": [*finalizers, "foregroundDeletion"]}},
                )

    def _cascade(self, ns: str, job_name: str) -> None:
        """The garbage collector: a deleted Job's pods go (after the kubelet has stopped them, if it runs)."""
        for pod in self.list_raw(PODS, ns):
            meta = pod["metadata"]
            if (meta.get("labels") or {}).get("job-name") != job_name or meta.get("deletionTimestamp"):
                continue
            if self.has_kubelet and meta.get("finalizers"):
                self.patch_object(
                    PODS,
                    ns,
                    meta["name"],
                    {"metadata": {"deletionTimestamp": now_rfc3339(), "deletionGracePeriodSeconds": 30}},
                )
            else:
                self.remove_object(PODS, ns, meta["name"])

    async def _handle_update(self, request: kmock.Request) -> Any:
        res, ns, name = request.resource, request.namespace or "", request.name or ""
        ctype = _header(request, "Content-Type")
        async with self._lock:
            old = self.get_raw(res, ns, name)
        if old is None:
            if "apply-patch" in ctype and not request.subresource:  # server-side apply creates
                data = copy.deepcopy(request.data) if isinstance(request.data, dict) else {}
                data.setdefault("metadata", {}).setdefault("name", name)
                create = attrs.evolve(
                    request, method=kmock.method.POST, action=kmock.action.CREATE, name=None, data=data
                )
                self._requests.append(create)  # kmock serves only the requests it has seen (by identity)
                create = self._admit_create(create)
                return await super()._handle(create)
            raise kmock.KubernetesObjectNotFoundError()
        patch = request.data
        if "json-patch" in ctype:
            if jsonpatch is None or not isinstance(patch, list):
                raise ApiError(status=415, reason="UnsupportedMediaType", message="json patches are not supported")
            new = jsonpatch.apply_patch(old, patch)
        elif "merge-patch" in ctype:
            new = merge_patch(old, patch)
        elif "strategic-merge-patch" in ctype or "apply-patch" in ctype:
            new = strategic_merge_patch(old, patch)
        else:
            raise ApiError(
                status=415,
                reason="UnsupportedMediaType",
                message=f"the body of the request was in an unknown format: {ctype}",
            )
        if request.subresource == "status":
            new = {**old, "status": new.get("status") or {}}
        elif request.subresource:
            raise ApiError(
                status=404,
                reason="NotFound",
                message=f"the server could not find the requested resource ({request.subresource})",
            )
        else:
            if "status" in old:  # the main resource's endpoint ignores status
                new["status"] = old["status"]
            for key in ("uid", "creationTimestamp", "name", "namespace", "generation", "deletionTimestamp"):
                if key in old["metadata"]:
                    new.setdefault("metadata", {})[key] = old["metadata"][key]
            if res == JOBS:
                self._check_job_update(old, new)
            if new.get("spec") != old.get("spec"):
                new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
            self._validate(new, strict=request.params.get("fieldValidation", "Strict") == "Strict")
        async with self._lock:
            if new != old:
                self.put_object(res, ns, name, new, event="MODIFIED")
            await self.flush_events()
        # Answer through the plain fallbacks (they serve the stored object) rather than kmock's blind dict merge.
        return await super(kmock.KubernetesEmulator, self)._handle(request)

    @staticmethod
    def _check_job_update(old: dict[str, Any], new: dict[str, Any]) -> None:
        """Job fields the API server will not change once created (the pod template is the one that matters)."""
        o_spec, n_spec = old.get("spec") or {}, new.get("spec") or {}
        name = old["metadata"]["name"]
        causes = []
        o_tpl, n_tpl = copy.deepcopy(o_spec.get("template") or {}), copy.deepcopy(n_spec.get("template") or {})
        never_started = o_spec.get("suspend") and not (old.get("status") or {}).get("startTime")
        if never_started:  # "mutable scheduling directives" of suspended Jobs that never ran
            for tpl in (o_tpl, n_tpl):
                tpl.pop("metadata", None)
                for key in ("nodeSelector", "tolerations", "affinity", "schedulingGates"):
                    tpl.get("spec", {}).pop(key, None)
        if o_tpl != n_tpl:
            causes.append("spec.template: Invalid value: core.PodTemplateSpec{...}: field is immutable")
        for key in ("selector", "completionMode", "podFailurePolicy"):
            if o_spec.get(key) != n_spec.get(key):
                causes.append(f"spec.{key}: Invalid value: {n_spec.get(key)!r}: field is immutable")
        if causes:
            raise _invalid("Job", "batch", name, causes)

    async def _serve_server_version(self, request: kmock.Request) -> Any:
        # NB: the GKE kubectl dispatcher at /usr/bin/kubectl execs kubectl.1.<minor> from this answer.
        minor = self.server_minor
        return {
            "major": "1",
            "minor": minor,
            "gitVersion": f"v1.{minor}.0",
            "gitCommit": "0" * 40,
            "gitTreeState": "clean",
            "buildDate": "2024-01-01T00:00:00Z",
            "goVersion": "go1.22.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        }

    async def _serve_version(self, request: kmock.Request) -> Any:
        data = await super()._serve_version(request)
        data["groupVersion"] = data["groupVersion"].lstrip("/")  # kmock 0.8 serves the core GV as "/v1"
        return data

    def _kind(self, res: Any) -> str:
        return self.resources[res].kind or res.plural.capitalize()

    def _selected(self, request: kmock.Request, obj: dict[str, Any]) -> bool:
        if sel := request.params.get("labelSelector"):
            try:
                if not match_labels((obj.get("metadata") or {}).get("labels") or {}, sel):
                    return False
            except ValueError as exc:
                raise ApiError(status=400, reason="BadRequest", message=str(exc)) from None
        if sel := request.params.get("fieldSelector"):
            return match_fields(obj, sel)
        return True

    async def _serve_list(self, request: kmock.Request) -> Any:
        data = await super()._serve_list(request)
        res = request.resource
        return {
            "apiVersion": f"{res.group}/{res.version}" if res.group else res.version,
            "kind": self._kind(res) + "List",
            "metadata": {"resourceVersion": str(self._rv)},
            "items": [o for o in data["items"] if self._selected(request, o)],
        }

    async def _serve_watch(self, request: kmock.Request) -> Any:
        # kmock streams as application/octet-stream, which client-go cannot decode: say it is JSON.
        return kmock.Response(headers={"Content-Type": "application/json"}, payload=self._watch_events(request))

    async def _watch_events(self, request: kmock.Request) -> Any:
        since = request.params.get("resourceVersion") or "0"
        since_rv = int(since) if since.isdigit() else 0
        events = aiter(super()._serve_watch(request))
        closing = asyncio.ensure_future(self.closing.wait())
        while True:  # until the client goes, or the server is closing (an open stream would block its exit)
            following = asyncio.ensure_future(anext(events))
            await asyncio.wait({following, closing}, return_when=asyncio.FIRST_COMPLETED)
            if not following.done():
                following.cancel()
                closing.cancel()
                return
            try:
                event = following.result()
            except StopAsyncIteration:
                closing.cancel()
                return
            if isinstance(event, dict):
                obj = event.get("object") or {}
                if not self._selected(request, obj):
                    continue
                rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
                # kmock replays every object as ADDED: not those the client's list (at since_rv) already had
                if event.get("type") == "ADDED" and rv.isdigit() and int(rv) <= since_rv:
                    continue
            yield event

    async def _serve_fetch(self, request: kmock.Request) -> Any:
        if request.subresource == "log":
            return await self._serve_log(request)
        return await super()._serve_fetch(request)

    async def _serve_log(self, request: kmock.Request) -> Any:
        ns, pod_name = request.namespace or "", request.name or ""
        async with self._lock:
            pod = self.get_raw(PODS, ns, pod_name)
        if pod is None:
            raise kmock.KubernetesObjectNotFoundError()
        spec = pod.get("spec") or {}
        names = [c["name"] for c in spec.get("containers") or []]
        all_names = [c["name"] for c in spec.get("initContainers") or []] + names
        container = request.params.get("container") or ""
        if not container:
            if len(names) != 1:
                raise ApiError(
                    status=400,
                    reason="BadRequest",
                    message=f"a container name must be specified for pod {pod_name}, choose one of: {names}",
                )
            container = names[0]
        if container not in all_names:
            raise ApiError(
                status=400, reason="BadRequest", message=f"container {container} is not valid for pod {pod_name}"
            )
        key = (ns, pod_name, container)
        source = self.previous_logs if request.params.get("previous") == "true" else self.pod_logs
        if key not in source:
            if source is self.previous_logs:
                raise ApiError(
                    status=400,
                    reason="BadRequest",
                    message=f'previous terminated container "{container}" in pod "{pod_name}" not found',
                )
            why = self.waiting.get(key, "ContainerCreating")
            raise ApiError(
                status=400,
                reason="BadRequest",
                message=f'container "{container}" in pod "{pod_name}" is waiting to start: {why}',
            )
        text = source[key]
        tail = request.params.get("tailLines")
        if tail is not None and int(tail) >= 0:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[len(lines) - int(tail) :]) if int(tail) else ""
        # NB: bytes, not a kmock.Response: a Response's headers would stick to the fallback that serves every GET.
        if request.params.get("follow") != "true" or source is self.previous_logs:
            return text.encode()
        return self._follow(key, text)

    async def _follow(self, key: tuple[str, str, str], text: str) -> Any:
        yield text.encode()
        sent = len(self.pod_logs.get(key, ""))
        while True:
            closed = key in self.closed_logs
            current = self.pod_logs.get(key)
            if current is None or len(current) < sent:  # the pod went, or the container restarted
                return
            if len(current) > sent:
                yield current[sent:].encode()
                sent = len(current)
            elif closed or self.closing.is_set():
                return
            await asyncio.sleep(0.1)


class FakeKubeThread:
    """Runs FakeKube on 127.0.0.1 in a background thread; sync helpers for tests and the fake kubelet."""

    def __init__(self, port: int = 0, minor: str = "29") -> None:
        self.port, self.minor = port, str(minor)
        self.url = ""
        self.kube: FakeKube
        self.loop: asyncio.AbstractEventLoop
        self._ready = threading.Event()
        self._failed: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=f"fake-kube-1.{minor}", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # noqa: BLE001 - reported to the starting thread
            self._failed = exc
            self._ready.set()

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        kube = FakeKube()
        kube.server_minor = self.minor
        async with kube, kmock.Server(kube, port=self.port or None) as srv:
            self.kube, self.url = kube, str(srv.url).rstrip("/")
            self._ready.set()
            await self._stop.wait()
            kube.closing.set()
            await asyncio.sleep(0.2)  # the streams see it and end

    def start(self) -> FakeKubeThread:
        self._thread.start()
        if not self._ready.wait(15) or self._failed is not None:
            raise RuntimeError(f"the emulated API server did not start: {self._failed!r}")
        return self

    def stop(self) -> None:
        if self._thread.is_alive() and self._ready.is_set() and self._failed is None:
            self.loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(10)

    def __enter__(self) -> FakeKubeThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def kubeconfig(self, namespace: str = "default") -> str:
        return (
            "apiVersion: v1\nkind: Config\n"
            f'clusters:\n- name: fake\n  cluster: {{server: "{self.url}"}}\n'
            "users:\n- name: fake\n  user: {}\n"
            f"contexts:\n- name: fake\n  context: {{cluster: fake, user: fake, namespace: {namespace}}}\n"
            "current-context: fake\n"
        )

    def call(self, fn: Callable[..., Any], *args: Any, timeout: float = 10) -> Any:
        """Run fn(kube, *args) on the server's loop under its lock (what the kubelet/controllers do); the
        watchers hear about what fn changed through kube.put_object/patch_object/remove_object."""

        async def run() -> Any:
            async with self.kube._lock:
                try:
                    return fn(self.kube, *args)
                finally:
                    await self.kube.flush_events()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    # Read-only conveniences for tests.
    def job(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.call(lambda k: k.get_raw(JOBS, namespace, name))

    def pods(self, namespace: str, job: str | None = None) -> list[dict[str, Any]]:
        pods = self.call(lambda k: k.list_raw(PODS, namespace))
        return [p for p in pods if job is None or (p["metadata"].get("labels") or {}).get("job-name") == job]


# -- the fake kubelet / job controller / container runtime ----------------------------------------------------

_LIVE_PROCESSES: set[subprocess.Popen[bytes]] = set()


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@atexit.register
def _kill_leftovers() -> None:  # last resort: a kubelet that was never stopped
    for proc in list(_LIVE_PROCESSES):
        _kill_group(proc, signal.SIGKILL)


def _expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion in command, args and env values ($$ escapes)."""
    return re.sub(
        r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)",
        lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1), m.group(0)),
        text,
    )


@dataclass
class _Container:
    name: str
    spec: dict[str, Any]
    kind: str  # "sidecar", "init" or "main"
    proc: subprocess.Popen[bytes] | None = None
    reader: threading.Thread | None = None
    state: dict[str, Any] = field(default_factory=lambda: {"waiting": {"reason": "PodInitializing"}})
    last_state: dict[str, Any] = field(default_factory=dict)
    restarts: int = 0
    started: bool = False  # its startup probe passed (or it has none and is running)
    ready: bool = False
    exit_code: int | None = None
    started_at: float = 0.0
    next_probe: float = 0.0
    restart_at: float = 0.0

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "image": self.spec.get("image", ""),
            "imageID": "",
            "ready": self.ready,
            "restartCount": self.restarts,
            "started": self.started if self.kind != "init" else self.running,
            "state": copy.deepcopy(self.state),
            "lastState": copy.deepcopy(self.last_state),
        }
        if self.proc is not None:
            out["containerID"] = f"fake://{self.proc.pid}"
        return out


class _PodRunner:
    """One Job's pod: its containers' processes and the Pod/Job status they lead to."""

    def __init__(self, kubelet: FakeKubelet, job: dict[str, Any], pod_name: str) -> None:
        self.kubelet, self.cluster = kubelet, kubelet.cluster
        self.job = job
        self.ns, self.job_name = job["metadata"]["namespace"], job["metadata"]["name"]
        self.job_uid = job["metadata"]["uid"]
        self.pod = pod_name
        self.uid = str(uuid.uuid4())
        spec = job["spec"]["template"]["spec"]
        self.spec = spec
        self.containers = [
            _Container(c["name"], c, "sidecar" if c.get("restartPolicy") == "Always" else "init")
            for c in spec.get("initContainers") or []
        ] + [_Container(c["name"], c, "main") for c in spec.get("containers") or []]
        for c in self.containers:
            if c.kind == "main":
                c.state = {"waiting": {"reason": "PodInitializing"}}
        self.phase = "Pending"
        self.conditions: dict[str, dict[str, Any]] = {}
        self.start_time = now_rfc3339()
        self.stop_reason: str | None = None
        self.stop_event = threading.Event()
        self.done = threading.Event()
        self.outcome: str | None = None  # "Succeeded" / "Failed" once the pod finished on its own
        self._pushed: Any = None
        self.retry_at = 0.0  # set by the controller when the failed pod is to be replaced
        self.thread = threading.Thread(target=self._run, name=f"fake-pod-{pod_name}", daemon=True)

    # -- public ---------------------------------------------------------------------------------------------

    def request_stop(self, reason: str) -> None:
        if self.stop_reason is None:
            self.stop_reason = reason
        self.stop_event.set()

    def pids(self) -> dict[str, int]:
        return {c.name: c.proc.pid for c in self.containers if c.proc is not None and c.running}

    # -- the pod's life -------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._set_condition("PodScheduled", True)
            if self._admitted():
                self._set_condition(
                    "Initialized",
                    False,
                    "ContainersNotInitialized",
                    "containers with incomplete status: " + str([c.name for c in self.containers if c.kind != "main"]),
                )
                self._start_and_supervise()
        except Exception:  # a bug here must not leave processes or hide: it lands in kubelet.errors
            self.kubelet.errors.append(f"pod {self.ns}/{self.pod}:\n{traceback.format_exc()}")
        finally:
            try:
                self._terminate(self.containers, self._grace())
                self._finish()
            except Exception:
                self.kubelet.errors.append(f"pod {self.ns}/{self.pod} (finish):\n{traceback.format_exc()}")
            finally:
                self.done.set()

    def _sleep(self, seconds: float) -> bool:
        """Sleep unless told to stop; True if told."""
        return self.stop_event.wait(seconds)

    def _grace(self) -> float:
        spec_grace = self.spec.get("terminationGracePeriodSeconds")
        grace = self.kubelet.grace if spec_grace is None else min(float(spec_grace), self.kubelet.grace)
        return 0.5 if self.stop_reason == "kubelet-stopped" else grace

    def _admitted(self) -> bool:
        """Wait while the scheduler cannot place the pod or an image cannot be pulled (knobs of the kubelet)."""
        while not self.stop_event.is_set():
            if self.kubelet.unschedulable:
                self._set_condition(
                    "PodScheduled",
                    False,
                    "Unschedulable",
                    "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
                    "1 No preemption victims found for incoming pod.",
                )
            elif bad := [c for c in self.containers if c.name in self.kubelet.fail_image_pull]:
                self._set_condition("PodScheduled", True)
                for c in bad:
                    image = c.spec.get("image", "")
                    c.state = {
                        "waiting": {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}
                    }
            else:
                self._set_condition("PodScheduled", True)
                return True
            self._push()
            self._sleep(self.kubelet.poll)
        return False

    def _start_and_supervise(self) -> None:
        sidecars = [c for c in self.containers if c.kind == "sidecar"]
        for c in self.containers:
            if c.kind == "main":
                break
            if not self._start(c):
                return self._pod_failed_early(c)
            if c.kind == "init":
                if not self._wait_exit(c):
                    return None
                if c.exit_code != 0:
                    return self._pod_failed_early(c)
                continue
            while not c.started:
                if self._sleep(self.kubelet.probe_poll):
                    return None
                self._supervise_sidecar(c)
                self._push()
        self._set_condition("Initialized", True)
        mains = [c for c in self.containers if c.kind == "main"]
        for c in mains:
            self._start(c)
        self.phase = "Running"
        while True:
            self._update_readiness()
            self._push()
            if all(not c.running for c in mains):
                break
            if self._sleep(self.kubelet.probe_poll):
                return None
            for c in sidecars:
                self._supervise_sidecar(c)
        for c in mains:
            self._reap(c)
        # The regular containers are done: the sidecars go, in reverse order, then the pod's phase is known.
        for c in reversed(sidecars):
            self._terminate([c], self._grace())
        self.outcome = "Succeeded" if all(c.exit_code == 0 for c in mains) else "Failed"
        return None

    def _pod_failed_early(self, c: _Container) -> None:
        self._reap(c)
        self.outcome = "Failed"

    def _wait_exit(self, c: _Container) -> bool:
        while c.running:
            if self._sleep(self.kubelet.probe_poll):
                return False
            self._push()
        self._reap(c)
        return True

    # -- containers -----------------------------------------------------------------------------------------

    def _env(self, c: _Container) -> tuple[dict[str, str], dict[str, str]]:
        """(the process's environment, the container's own variables)."""
        own: dict[str, str] = {}
        fields = {
            "metadata.name": self.pod,
            "metadata.namespace": self.ns,
            "metadata.uid": self.uid,
            "spec.nodeName": self.kubelet.node_name,
            "spec.serviceAccountName": self.spec.get("serviceAccountName", "default"),
            "status.podIP": "127.0.0.1",
            "status.hostIP": "127.0.0.1",
        }
        labels = self.job["spec"]["template"].get("metadata", {}).get("labels") or {}
        for item in c.spec.get("env") or []:
            if "value" in item:
                own[item["name"]] = _expand(str(item["value"]), own)
            elif path := ((item.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath"):
                m = re.match(r"metadata\.labels\['(.+)'\]$", path)
                value = labels.get(m.group(1)) if m else fields.get(path)
                if value is not None:
                    own[item["name"]] = value
            # other valueFrom sources (secrets, config maps, resources) are not emulated: the variable is unset
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        env["HOSTNAME"] = self.pod
        env.update(own)
        return env, own

    def _start(self, c: _Container) -> bool:
        env, own = self._env(c)
        argv = [_expand(str(a), own) for a in [*(c.spec.get("command") or []), *(c.spec.get("args") or [])]]
        key = (self.ns, self.pod, c.name)
        logs = self.cluster.kube
        if key in logs.pod_logs:
            logs.previous_logs[key] = logs.pod_logs[key]
        logs.pod_logs[key] = ""
        logs.closed_logs.discard(key)
        logs.waiting.pop(key, None)
        cwd = c.spec.get("workingDir") or self.kubelet.workdir
        c.started = c.ready = False
        c.exit_code = None
        try:
            if not argv:
                raise OSError("no command: the fake runtime cannot run an image's entrypoint")
            if cwd:
                os.makedirs(cwd, exist_ok=True)
            proc = subprocess.Popen(
                argv,
                env=env,
                cwd=cwd or None,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as exc:
            c.proc = None
            c.exit_code = 128
            msg = f"failed to create containerd task: failed to start: exec: {exc}"
            c.state = {
                "terminated": {
                    "exitCode": 128,
                    "reason": "StartError",
                    "message": msg,
                    "startedAt": "1970-01-01T00:00:00Z",
                    "finishedAt": now_rfc3339(),
                }
            }
            logs.closed_logs.add(key)
            return False
        c.proc = proc
        _LIVE_PROCESSES.add(proc)
        self.kubelet._procs.add(proc)
        c.started_at = time.monotonic()
        c.next_probe = c.started_at + float((c.spec.get("startupProbe") or {}).get("initialDelaySeconds", 0))
        c.state = {"running": {"startedAt": now_rfc3339()}}
        if c.kind == "main" or (c.kind == "sidecar" and "startupProbe" not in c.spec):
            c.started = True
        c.reader = threading.Thread(target=self._read_log, args=(proc, key), daemon=True)
        c.reader.start()
        return True

    def _read_log(self, proc: subprocess.Popen[bytes], key: tuple[str, str, str]) -> None:
        logs = self.cluster.kube
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            text = decoder.decode(chunk, final=not chunk)
            if text:
                logs.pod_logs[key] = logs.pod_logs.get(key, "") + text
            if not chunk:
                break
        proc.stdout.close()
        logs.closed_logs.add(key)

    def _reap(self, c: _Container) -> None:
        """Record how a container's process ended (and kill what it left behind in its group)."""
        if c.proc is None:
            return
        code = c.proc.wait()
        _kill_group(c.proc, signal.SIGKILL)  # a container's leftovers die with it
        _LIVE_PROCESSES.discard(c.proc)
        if c.reader is not None:
            c.reader.join(2)
        if "terminated" in c.state:
            return
        c.exit_code = code if code >= 0 else 128 - code
        started = (c.state.get("running") or {}).get("startedAt", now_rfc3339())
        c.state = {
            "terminated": {
                "exitCode": c.exit_code,
                "reason": "Completed" if c.exit_code == 0 else "Error",
                "startedAt": started,
                "finishedAt": now_rfc3339(),
                "containerID": f"fake://{c.proc.pid}",
            }
        }
        c.started = c.ready = False

    def _terminate(self, containers: Iterable[_Container], grace: float) -> None:
        live = [c for c in containers if c.proc is not None and c.proc.poll() is None]
        for c in live:
            _kill_group(c.proc, signal.SIGTERM)  # type: ignore[arg-type]
        deadline = time.monotonic() + grace
        for c in live:
            assert c.proc is not None
            try:
                c.proc.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill_group(c.proc, signal.SIGKILL)
        for c in containers:
            if c.proc is not None and "terminated" not in c.state:
                self._reap(c)

    def _supervise_sidecar(self, c: _Container) -> None:
        """restartPolicy: Always: a sidecar that exits (or fails its startup probe) is started again."""
        now = time.monotonic()
        if c.proc is not None and not c.running and not c.restart_at:
            self._reap(c)
            c.last_state, c.restart_at = c.state, now + self.kubelet.restart_backoff
            c.state = {
                "waiting": {"reason": "CrashLoopBackOff", "message": f"back-off restarting failed container {c.name}"}
            }
        if c.restart_at:
            if now >= c.restart_at:
                c.restart_at = 0.0
                c.restarts += 1
                self._start(c)
            return
        if c.running and not c.started:
            probe = c.spec["startupProbe"]
            if now >= c.next_probe and self._probe(c, probe):
                c.started = True
            elif now > c.started_at + self._probe_budget(probe):
                self._terminate([c], self._grace())  # startup probe failed: killed, then restarted
                c.last_state, c.restart_at = c.state, now + self.kubelet.restart_backoff
                c.state = {"waiting": {"reason": "CrashLoopBackOff", "message": "Startup probe failed"}}

    @staticmethod
    def _probe_budget(probe: dict[str, Any]) -> float:
        return float(probe.get("initialDelaySeconds", 0)) + float(probe.get("failureThreshold", 3)) * float(
            probe.get("periodSeconds", 10)
        )

    def _update_readiness(self) -> None:
        now = time.monotonic()
        for c in self.containers:
            if c.kind == "init":
                continue
            if not c.running or not c.started:
                c.ready = False
                continue
            probe = c.spec.get("readinessProbe")
            if probe is None:
                c.ready = True
            elif now >= c.next_probe:
                c.ready = self._probe(c, probe)
                c.next_probe = now + min(float(probe.get("periodSeconds", 10)), 1.0)

    def _probe(self, c: _Container, probe: dict[str, Any]) -> bool:
        timeout = min(float(probe.get("timeoutSeconds", 1)), 1.0)
        try:
            if "httpGet" in probe:
                get = probe["httpGet"]
                port = self._port(c, get.get("port"))
                scheme = str(get.get("scheme", "HTTP")).lower()
                url = f"{scheme}://{get.get('host') or '127.0.0.1'}:{port}{get.get('path') or '/'}"
                req = urllib.request.Request(url, headers={h["name"]: h["value"] for h in get.get("httpHeaders") or []})
                opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
                with opener.open(req, timeout=timeout) as resp:
                    return 200 <= resp.status < 400
            if "tcpSocket" in probe:
                port = self._port(c, probe["tcpSocket"].get("port"))
                with socket.create_connection((probe["tcpSocket"].get("host") or "127.0.0.1", port), timeout=timeout):
                    return True
            if "exec" in probe:
                result = subprocess.run(
                    probe["exec"]["command"], env=self._env(c)[0], capture_output=True, timeout=max(timeout, 5)
                )
                return result.returncode == 0
        except (OSError, ValueError, urllib.error.URLError, subprocess.TimeoutExpired):
            return False
        return True  # grpc probes are not emulated: they pass

    @staticmethod
    def _port(c: _Container, port: Any) -> int:
        if isinstance(port, int) or str(port).isdigit():
            return int(port)
        for p in c.spec.get("ports") or []:
            if p.get("name") == port:
                return int(p["containerPort"])
        raise ValueError(f"no port named {port!r} in container {c.name}")

    # -- status ---------------------------------------------------------------------------------------------

    def _set_condition(self, kind: str, status: bool, reason: str = "", message: str = "") -> None:
        cur = self.conditions.get(kind)
        value = "True" if status else "False"
        if cur and cur["status"] == value and cur.get("reason", "") == reason:
            return
        cond = {"type": kind, "status": value, "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
        if reason:
            cond["reason"] = reason
        if message:
            cond["message"] = message
        self.conditions[kind] = cond

    def _set_waiting(self, c: _Container) -> None:
        waiting = c.state.get("waiting")
        if waiting:
            why = waiting["reason"]
            if why == "ImagePullBackOff":
                why = "trying and failing to pull image"
            self.cluster.kube.waiting[(self.ns, self.pod, c.name)] = why

    def pod_status(self) -> dict[str, Any]:
        mains = [c for c in self.containers if c.kind == "main"]
        inits = [c for c in self.containers if c.kind != "main"]
        ready = self.phase == "Running" and all(c.ready for c in self.containers if c.kind != "init")
        for c in self.containers:
            self._set_waiting(c)
        if "Initialized" in self.conditions:
            why = "" if ready else "ContainersNotReady"
            self._set_condition("ContainersReady", ready, why)
            self._set_condition("Ready", ready, why)
        order = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"]
        status: dict[str, Any] = {
            "phase": self.phase,
            "conditions": [self.conditions[k] for k in order if k in self.conditions],
            "hostIP": "127.0.0.1",
            "podIP": "127.0.0.1",
            "podIPs": [{"ip": "127.0.0.1"}],
            "startTime": self.start_time,
            "qosClass": "BestEffort",
            "containerStatuses": [c.status() for c in mains],
        }
        if inits:
            status["initContainerStatuses"] = [c.status() for c in inits]
        if self.conditions.get("PodScheduled", {}).get("status") == "False":
            for key in ("hostIP", "podIP", "podIPs", "startTime", "containerStatuses", "initContainerStatuses"):
                status.pop(key, None)
        return status

    def _push(self) -> None:
        """Send the pod's status and the Job's active/ready counts, if they changed."""
        pod_status = self.pod_status()
        ready = (
            1
            if pod_status["conditions"]
            and any(c["type"] == "Ready" and c["status"] == "True" for c in pod_status["conditions"])
            else 0
        )
        if (pod_status, ready) == self._pushed:
            return
        self._pushed = (pod_status, ready)

        def push(k: FakeKube) -> None:
            k.patch_object(PODS, self.ns, self.pod, {"status": pod_status})
            job = k.get_raw(JOBS, self.ns, self.job_name)
            if job is not None and job["metadata"]["uid"] == self.job_uid and not _finished(job):
                k.patch_object(JOBS, self.ns, self.job_name, {"status": {"ready": ready}})

        self.cluster.call(push)

    def _finish(self) -> None:
        reason = self.stop_reason
        if reason == "kubelet-stopped":
            return
        self.phase = self.outcome or "Failed"
        for c in self.containers:
            if "terminated" not in c.state:
                c.state = {
                    "terminated": {"exitCode": 137, "reason": "ContainerStatusUnknown", "finishedAt": now_rfc3339()}
                }
            c.ready = c.started = False
        pod_status = self.pod_status()
        exits = {c.name: c.exit_code for c in self.containers if c.kind != "sidecar" and c.exit_code is not None}
        controller = self.kubelet
        cluster, ns, pod, job_name, job_uid = self.cluster, self.ns, self.pod, self.job_name, self.job_uid

        def finish(k: FakeKube) -> None:
            live_pod = k.get_raw(PODS, ns, pod)
            if live_pod is not None:
                k.patch_object(PODS, ns, pod, {"status": pod_status})
            job = k.get_raw(JOBS, ns, job_name)
            if job is not None and job["metadata"]["uid"] != job_uid:
                job = None
            if live_pod is not None:
                if reason in ("deleted", "suspended", "deadline") or live_pod["metadata"].get("deletionTimestamp"):
                    k.remove_object(PODS, ns, pod)
                else:  # the Job controller has counted it: it drops its finalizer, the pod stays until GC
                    k.patch_object(PODS, ns, pod, {"metadata": {"finalizers": None}})
            if job is None or job["metadata"].get("deletionTimestamp"):
                return
            if reason == "suspended":
                k.patch_object(JOBS, ns, job_name, {"status": {"active": None, "ready": 0, "startTime": None}})
                return
            controller._job_finished(k, job, pod, self.phase, exits, reason)

        cluster.call(finish)


def _finished(job: dict[str, Any]) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or []
    )


def _true_conditions(job: dict[str, Any]) -> set[str]:
    return {c.get("type") for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"}


def _condition(kind: str, reason: str = "", message: str = "", status: str = "True") -> dict[str, Any]:
    now = now_rfc3339()
    cond = {"type": kind, "status": status, "lastProbeTime": now, "lastTransitionTime": now}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


class FakeKubelet:
    """The Job controller, the kubelet and the container runtime for FakeKube, in one background thread.

    It polls the emulator every `poll` seconds through `cluster.call` (never through kubectl). A Job that is not
    suspended gets a pod `<job>-<5 chars>`; its native sidecars (initContainers with restartPolicy: Always) start
    in order, each behind its startupProbe, then the regular containers; the Job is `ready` once every
    readinessProbe answers. When the regular containers exit, the sidecars get SIGTERM (SIGKILL after `grace`)
    and the Job gets Complete or Failed (FailureTarget/SuccessCriteriaMet first on 1.31+; FailureTarget for a
    podFailurePolicy FailJob on any minor). Deleting the Job (or its pod) stops the processes the same way.

    Knobs (attributes, may change while it runs): `hold` (no Job is started: no pod, no startTime), `max_pods`
    (at most that many pods at once: the rest wait, as on a node with room for no more),
    `unschedulable` (pods stay Pending with PodScheduled False/Unschedulable; the Job has a startTime),
    `fail_image_pull` (container names whose image never pulls: pod Pending, waiting reason ImagePullBackOff,
    nothing runs), `grace` (seconds from SIGTERM to SIGKILL, capped by the pod's
    terminationGracePeriodSeconds), `restart_backoff` (before a sidecar or a failed pod is retried),
    `workdir` (cwd of containers without workingDir), `poll` / `probe_poll` (loop and probe periods; a probe's
    failureThreshold x periodSeconds is kept as a time budget). Also honoured: activeDeadlineSeconds
    (DeadlineExceeded), ttlSecondsAfterFinished, backoffLimit (a failed pod is replaced after `restart_backoff`),
    podFailurePolicy onExitCodes (FailJob / Ignore / Count), suspend / resume, plain (non-sidecar) init
    containers, $(VAR) expansion ($$ -> $), env fieldRef (pod name, namespace, uid, labels, IPs).
    Not emulated: images, volumes (the PVC is the same local directory), resources, env from secrets/config maps,
    exponential back-off, liveness probes, indexed or parallel Jobs, pods that are not a Job's.
    """

    def __init__(
        self,
        cluster: FakeKubeThread,
        *,
        hold: bool = False,
        max_pods: int | None = None,
        unschedulable: bool = False,
        fail_image_pull: Iterable[str] = (),
        grace: float = 5.0,
        poll: float = 0.2,
        probe_poll: float = 0.1,
        restart_backoff: float = 1.0,
        workdir: str | os.PathLike[str] | None = None,
        node_name: str = "fake-node",
    ) -> None:
        self.cluster = cluster
        self.hold, self.unschedulable = hold, unschedulable
        # At most this many pods run at once (None: no limit). Real pods each have a network namespace
        # of their own; these processes share this machine's, so pods whose servers bind one port
        # must take turns, as on a node with room for one.
        self.max_pods = max_pods
        self.fail_image_pull = set(fail_image_pull)
        self.grace, self.poll, self.probe_poll, self.restart_backoff = grace, poll, probe_poll, restart_backoff
        self.workdir = os.fspath(workdir) if workdir is not None else None
        self.node_name = node_name
        self.errors: list[str] = []
        self._runners: dict[str, _PodRunner] = {}  # by job uid
        self._procs: set[subprocess.Popen[bytes]] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fake-kubelet", daemon=True)

    # -- public ---------------------------------------------------------------------------------------------

    def start(self) -> FakeKubelet:
        self.cluster.call(lambda k: setattr(k, "has_kubelet", True))
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the loop and kill every process this kubelet started (SIGTERM, then SIGKILL)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        for runner in list(self._runners.values()):
            runner.request_stop("kubelet-stopped")
        for runner in list(self._runners.values()):
            runner.done.wait(10)
        for proc in list(self._procs):
            _kill_group(proc, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5)
            _LIVE_PROCESSES.discard(proc)
        with contextlib.suppress(Exception):
            self.cluster.call(lambda k: setattr(k, "has_kubelet", False), timeout=2)

    def __enter__(self) -> FakeKubelet:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def pod_name(self, namespace: str, job: str) -> str | None:
        runner = self._runner_for(namespace, job)
        return runner.pod if runner else None

    def pids(self, namespace: str, job: str) -> dict[str, int]:
        """The live processes of the Job's current pod: {container name: pid (its process group id too)}."""
        runner = self._runner_for(namespace, job)
        return runner.pids() if runner else {}

    def all_pids(self) -> set[int]:
        """Every process this kubelet started that is still alive."""
        return {p.pid for p in self._procs if p.poll() is None}

    def _runner_for(self, namespace: str, job: str) -> _PodRunner | None:
        found = [r for r in list(self._runners.values()) if (r.ns, r.job_name) == (namespace, job)]
        return found[-1] if found else None

    # -- the loop -------------------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._tick()
            except Exception:
                if not self._stop.is_set():
                    self.errors.append(traceback.format_exc())
            self._stop.wait(self.poll)

    def _tick(self) -> None:
        jobs, pods = self.cluster.call(lambda k: (k.list_raw(JOBS), k.list_raw(PODS)))
        pods_by_key = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
        known = set(self._runners)  # the pods started below are not in this snapshot
        live_uids = set()
        for job in jobs:
            live_uids.add(job["metadata"]["uid"])
            self._sync_job(job, pods)
        for uid, runner in list(self._runners.items()):
            pod = pods_by_key.get((runner.ns, runner.pod))
            if uid in known and not runner.done.is_set() and (pod is None or pod["metadata"].get("deletionTimestamp")):
                runner.request_stop("deleted")
            if runner.done.is_set() and uid not in live_uids:
                del self._runners[uid]
        # Pods whose kubelet is gone (a previous kubelet, or the Job was orphaned and then its pod deleted).
        for (ns, name), pod in pods_by_key.items():
            meta = pod["metadata"]
            if meta.get("deletionTimestamp") and not any(r.pod == name and r.ns == ns for r in self._runners.values()):
                self.cluster.call(lambda k, ns=ns, name=name: k.remove_object(PODS, ns, name))

    def _sync_job(self, job: dict[str, Any], pods: list[dict[str, Any]]) -> None:
        meta, spec, status = job["metadata"], job.get("spec") or {}, job.get("status") or {}
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        runner = self._runners.get(uid)
        if meta.get("deletionTimestamp"):  # foreground deletion: the Job goes once its pods have
            mine = [p for p in pods if (p["metadata"].get("labels") or {}).get("controller-uid") == uid]
            if not mine and (runner is None or runner.done.is_set()):
                self.cluster.call(lambda k: k.remove_object(JOBS, ns, name))
            return
        conditions = _true_conditions(job)
        if "Complete" in conditions or "Failed" in conditions:
            ttl = spec.get("ttlSecondsAfterFinished")
            finished_at = max(
                (
                    parse_rfc3339(c["lastTransitionTime"])
                    for c in status.get("conditions") or []
                    if c.get("lastTransitionTime")
                ),
                default=time.time(),
            )
            if ttl is not None and time.time() >= finished_at + float(ttl):

                def expire(k: FakeKube) -> None:
                    k.remove_object(JOBS, ns, name)
                    k._cascade(ns, name)

                self.cluster.call(expire)
            return
        if spec.get("suspend"):
            if runner is not None and not runner.done.is_set():
                runner.request_stop("suspended")
            elif "Suspended" not in conditions:
                self._set_job_conditions(ns, name, job, _condition("Suspended", "JobSuspended", "Job suspended"))
                self.cluster.call(
                    lambda k: k.patch_object(
                        JOBS, ns, name, {"status": {"active": None, "ready": 0, "startTime": None}}
                    )
                )
            return
        if runner is not None:
            if not runner.done.is_set():
                deadline = spec.get("activeDeadlineSeconds")
                started = status.get("startTime")
                if deadline is not None and started and time.time() > parse_rfc3339(started) + float(deadline):
                    runner.request_stop("deadline")
                return
            if time.monotonic() < runner.retry_at:
                return
            del self._runners[uid]  # resumed after a suspension, or a retry within the backoff limit
        if "Suspended" in conditions:
            self._set_job_conditions(
                ns, name, job, _condition("Suspended", "JobResumed", "Job resumed", status="False")
            )
        if self.hold:
            return
        if self.max_pods is not None and sum(not r.done.is_set() for r in self._runners.values()) >= self.max_pods:
            return  # the node is full: the Job waits, with no startTime
        self._start_pod(job)

    def _set_job_conditions(self, ns: str, name: str, job: dict[str, Any], *new: dict[str, Any]) -> None:
        conditions = [
            c for c in (job.get("status") or {}).get("conditions") or [] if c["type"] not in {n["type"] for n in new}
        ]
        conditions += list(new)
        self.cluster.call(lambda k: k.patch_object(JOBS, ns, name, {"status": {"conditions": conditions}}))

    def _start_pod(self, job: dict[str, Any]) -> None:
        meta = job["metadata"]
        ns, name, uid = meta["namespace"], meta["name"], meta["uid"]
        base = f"{name}-"[:58]
        pod_name = base + "".join(random.choice(_NAME_SUFFIX_ALPHABET) for _ in range(5))
        runner = _PodRunner(self, job, pod_name)
        template = job["spec"]["template"]
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": pod_name,
                "generateName": base,
                "namespace": ns,
                "uid": runner.uid,
                "creationTimestamp": now_rfc3339(),
                "labels": {
                    **(template.get("metadata", {}).get("labels") or {}),
                    "job-name": name,
                    "batch.kubernetes.io/job-name": name,
                },
                "annotations": dict(template.get("metadata", {}).get("annotations") or {}),
                "finalizers": [JOB_TRACKING_FINALIZER],
                "ownerReferences": [
                    {
                        "apiVersion": "batch/v1",
                        "kind": "Job",
                        "name": name,
                        "uid": uid,
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": {**copy.deepcopy(template.get("spec") or {}), "nodeName": self.node_name},
            "status": {"phase": "Pending", "qosClass": "BestEffort"},
        }
        started = (job.get("status") or {}).get("startTime") or now_rfc3339()

        def create(k: FakeKube) -> bool:
            live = k.get_raw(JOBS, ns, name)  # (the snapshot this decision came from may be stale)
            if live is None or live["metadata"]["uid"] != uid or live["metadata"].get("deletionTimestamp"):
                return False
            if _finished(live) or (live.get("spec") or {}).get("suspend"):
                return False
            k.put_object(PODS, ns, pod_name, pod)
            k.patch_object(
                JOBS, ns, name, {"status": {"startTime": started, "active": 1, "ready": 0, **_terminating(k)}}
            )
            return True

        if self.cluster.call(create):
            self._runners[uid] = runner
            runner.thread.start()

    # Called by a pod runner (under the server's lock) once its pod is over.
    def _job_finished(
        self, k: FakeKube, job: dict[str, Any], pod: str, phase: str, exits: dict[str, int], reason: str | None
    ) -> None:
        ns, name = job["metadata"]["namespace"], job["metadata"]["name"]
        spec, status = job.get("spec") or {}, job.get("status") or {}
        minor = int(k.server_minor)
        conditions = [c for c in status.get("conditions") or [] if c.get("type") not in ("Complete", "Failed")]
        if phase == "Succeeded":
            succeeded = int(status.get("succeeded") or 0) + 1
            if minor >= 31:
                conditions.append(
                    _condition("SuccessCriteriaMet", "CompletionsReached", "Reached expected number of succeeded pods")
                )
            conditions.append(
                _condition("Complete", "CompletionsReached", "Reached expected number of succeeded pods")
                if minor >= 31
                else _condition("Complete")
            )
            k.patch_object(
                JOBS,
                ns,
                name,
                {
                    "status": {
                        "active": None,
                        "ready": 0,
                        "succeeded": succeeded,
                        "completionTime": now_rfc3339(),
                        "conditions": conditions,
                        **_terminating(k),
                    }
                },
            )
            return
        failed = int(status.get("failed") or 0) + 1
        if reason == "deadline":
            why, message, count = "DeadlineExceeded", "Job was active longer than specified deadline", True
        else:
            why, message, count = _pod_failure_policy(spec, ns, pod, exits)
        if why is None:  # a retry: Ignore does not count, Count does (up to backoffLimit)
            if not count or failed <= int(spec.get("backoffLimit", 6)):
                runner = self._runner_for(ns, name)
                if runner is not None:
                    runner.retry_at = time.monotonic() + self.restart_backoff
                patch: dict[str, Any] = {"active": None, "ready": 0}
                if count:
                    patch["failed"] = failed
                k.patch_object(JOBS, ns, name, {"status": patch})
                return
            why, message = "BackoffLimitExceeded", "Job has reached the specified backoff limit"
        if minor >= 31 or why == "PodFailurePolicy":
            conditions.append(_condition("FailureTarget", why, message))
        conditions.append(_condition("Failed", why, message))
        k.patch_object(
            JOBS,
            ns,
            name,
            {"status": {"active": None, "ready": 0, "failed": failed, "conditions": conditions, **_terminating(k)}},
        )


def _terminating(k: FakeKube) -> dict[str, Any]:
    return {"terminating": 0} if int(k.server_minor) >= 29 else {}


def _pod_failure_policy(spec: dict[str, Any], ns: str, pod: str, exits: dict[str, int]) -> tuple[str | None, str, bool]:
    """(reason, message, counts) for a failed pod: a FailJob rule's match, or None (retry if the limit allows)."""
    for i, rule in enumerate((spec.get("podFailurePolicy") or {}).get("rules") or []):
        on = rule.get("onExitCodes")
        if not on:
            continue
        for container, code in exits.items():
            if code == 0 or (on.get("containerName") and on["containerName"] != container):
                continue
            if (code in (on.get("values") or [])) != (on.get("operator") == "In"):
                continue
            action = rule.get("action")
            if action == "FailJob":
                return (
                    "PodFailurePolicy",
                    f"Container {container} for pod {ns}/{pod} failed with exit code {code} matching FailJob rule at index {i}",
                    True,
                )
            return None, "", action != "Ignore"
    return None, "", True


# -- all of it, for a test ----------------------------------------------------------------------------------


@dataclass
class FakeKubeEnv:
    """What `running_fake_kube` yields. `env` = {KUBECONFIG, KUBECACHEDIR}: merge it into a subprocess's env."""

    kube: FakeKubeThread
    kubelet: FakeKubelet
    kubeconfig: Path
    env: dict[str, str]
    namespace: str

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        kubectl = shutil.which("kubectl") or "kubectl"
        return subprocess.run(
            [kubectl, *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **self.env},
        )


@contextlib.contextmanager
def running_fake_kube(
    tmp_path: str | os.PathLike[str], minor: str | int = "29", namespace: str = "default", **kubelet_knobs: Any
) -> Iterator[FakeKubeEnv]:
    """The emulated API server on 1.<minor>, a kubeconfig (context namespace `namespace`) and a kubectl cache dir
    under tmp_path, and a FakeKubelet with `kubelet_knobs`. Everything stops and every process dies on exit."""
    base = Path(tmp_path) / f"fake-kube-1.{minor}"
    base.mkdir(parents=True, exist_ok=True)
    with FakeKubeThread(minor=str(minor)) as kube:
        config = base / "kubeconfig.yaml"
        config.write_text(kube.kubeconfig(namespace))
        env = {"KUBECONFIG": str(config), "KUBECACHEDIR": str(base / "kcache")}
        kubelet = FakeKubelet(kube, **kubelet_knobs)
        try:
            kubelet.start()
            yield FakeKubeEnv(kube=kube, kubelet=kubelet, kubeconfig=config, env=env, namespace=namespace)
        finally:
            kubelet.stop()
            if kubelet.errors:
                print("fake kubelet errors:\n" + "\n".join(kubelet.errors), file=sys.stderr)
