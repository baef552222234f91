"""Kubernetes' own value rules for the config models: its names (DNS-1123), label keys and values,
resource quantities, and the names the backend gives its objects. Field validators as in
``rules.py``.

Light imports only (``api.py`` imports this module while it is being defined).
"""

from __future__ import annotations

import hashlib
import re
from decimal import Decimal
from typing import Any

# RFC 1123 label: what a namespace, a Job's name and a container's name must be.
DNS_LABEL_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
DNS_LABEL_MAX = 63
# A label's (or annotation's) key: an optional DNS-1123 subdomain prefix and a name of <= 63.
_KEY_NAME_RE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")
_PREFIX_RE = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?\Z")
LABEL_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
# A resource quantity as a memory request is written: a number and an optional unit.
QUANTITY_RE = re.compile(r"[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?\Z")
# extra_args' sections: what the Job and its pod carry besides our own.
EXTRA_SECTIONS = ("labels", "annotations")


def dns_label(cls: Any, v: str) -> str:
    if len(v) > DNS_LABEL_MAX or not DNS_LABEL_RE.match(v):
        raise ValueError(
            f"{v!r} is not a Kubernetes name: lowercase letters, digits and '-', starting and ending "
            f"with a letter or digit, at most {DNS_LABEL_MAX} characters"
        )
    return v


def optional_dns_label(cls: Any, v: str | None) -> str | None:
    return v if v is None else dns_label(cls, v)


def optional_context(cls: Any, v: str | None) -> str | None:
    """A kubeconfig context's name goes to kubectl as one argument: printable, one line."""
    if v is not None and (not v or not v.isprintable() or v.startswith("-")):
        raise ValueError(f"{v!r} is not a kubeconfig context name; write it on one line, without a leading '-'")
    return v


INT32_MAX = 2**31 - 1  # ttlSecondsAfterFinished is an int32 in the Job's schema
INT64_MAX = 2**63 - 1  # activeDeadlineSeconds is an int64; a quantity's bytes must fit one too
# Bytes per unit of a memory quantity.
QUANTITY_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}
QUANTITY_UNITS.update({f"{u}i": 1024 ** (i + 1) for i, u in enumerate("KMGTPE")})
# The most GPUs one pod is checked for (a quantity is multiplied by a pod's GPUs).
MOST_GPUS = 1024


def quantity(cls: Any, v: str) -> str:
    if not QUANTITY_RE.match(v):
        raise ValueError(f"{v!r} is not a Kubernetes memory quantity; write e.g. 32Gi or 64G")
    if quantity_bytes(v) * MOST_GPUS > INT64_MAX:
        raise ValueError(f"{v!r} is more memory than Kubernetes can count for a pod; write e.g. 32Gi")
    return v


def quantity_bytes(v: str) -> Decimal:
    number, unit = re.fullmatch(r"([0-9]+(?:\.[0-9]+)?)(.*)", v).groups()  # type: ignore[union-attr]
    return Decimal(number) * QUANTITY_UNITS[unit]


def optional_int32_seconds(cls: Any, v: int | None) -> int | None:
    if v is not None and not 0 <= v <= INT32_MAX:
        raise ValueError(f"must be from 0 to {INT32_MAX} seconds (an int32 in the Job), got {v}")
    return v


def optional_int64_seconds(cls: Any, v: int | None) -> int | None:
    if v is not None and not 1 <= v <= INT64_MAX:
        raise ValueError(f"must be from 1 to {INT64_MAX} seconds, got {v}")
    return v


def label_key(key: str) -> str | None:
    """Why ``key`` is not a label or annotation key, or None."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _PREFIX_RE.match(prefix)):
        return f"key {key!r}: its prefix is not a DNS subdomain (lowercase letters, digits, '-', '.')"
    if not name or len(name) > DNS_LABEL_MAX or not _KEY_NAME_RE.match(name):
        return f"key {key!r} is not a Kubernetes label key (letters, digits, '-', '_', '.'; at most 63 after a prefix/)"
    return None


def node_selector(cls: Any, v: dict[str, str]) -> dict[str, str]:
    for key, value in v.items():
        _check_label(key, value)
    return v


def extra_args(cls: Any, v: dict[str, dict[str, str]]) -> dict[str, dict[str, str]]:
    """``labels`` and ``annotations`` for the Job and its pod; nothing else is taken."""
    for section, entries in v.items():
        if section not in EXTRA_SECTIONS:
            raise ValueError(f"key {section!r}: Kubernetes extra_args takes only {' and '.join(EXTRA_SECTIONS)}")
        for key, value in entries.items():
            if section == "labels":
                _check_label(key, value)
            else:
                problem = label_key(key)
                if problem:
                    raise ValueError(f"annotations: {problem}")
                if len(value) > 4096:
                    raise ValueError(f"annotations: {key}: the value is longer than 4096 characters")
    return v


def _check_label(key: str, value: str) -> None:
    problem = label_key(key)
    if problem:
        raise ValueError(problem)
    if len(value) > DNS_LABEL_MAX or not LABEL_VALUE_RE.match(value):
        raise ValueError(
            f"{key}: {value!r} is not a Kubernetes label value (letters, digits, '-', '_', '.'; at most 63)"
        )


def object_name(*parts: str, room: int = 0) -> str:
    """A DNS-1123 name made of ``parts`` (a run id, a benchmark): lowercased, anything else made a
    '-', and when it is too long cut with a digest of the whole, so that two long names stay
    apart. ``room``: characters kept free at the end (a resubmission's ``-a<n>``)."""
    text = "-".join(parts).lower()
    name = re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", text)).strip("-") or "gym"
    limit = DNS_LABEL_MAX - room
    if len(name) > limit:
        digest = hashlib.sha256(text.encode()).hexdigest()[:8]
        name = name[: limit - len(digest) - 1].rstrip("-") + "-" + digest
    return name


def label_value(text: str) -> str:
    """``text`` as a label value (a run id, a benchmark), cut the way ``object_name`` cuts."""
    return object_name(text).strip("-")[:DNS_LABEL_MAX]
