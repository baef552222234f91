"""Benchmark run/prepare configs flattened into Hydra override tokens for ``gym eval``.

Every value reaches the driver exactly: strings are always quoted (so ``'true'`` stays a string),
quotes and backslashes are escaped by Hydra's rules, and ``${`` is escaped so that the driver's
OmegaConf does not interpolate a value the user wrote literally.
"""

from __future__ import annotations

import re
from typing import Any

from nemo_gym.orchestration.errors import UserError

_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-@]*$")
_BACKSLASHES_BEFORE_INTERPOLATION = re.compile(r"(\\*)\$\{")


def hydra_string(value: str) -> str:
    """A Hydra quoted string whose parsed and resolved value is exactly ``value``."""
    quote = '"' if value.count('"') <= value.count("'") else "'"
    text = _BACKSLASHES_BEFORE_INTERPOLATION.sub(lambda m: m.group(1) * 2 + "\\${", value)
    # Hydra: backslashes are literal except before the closing quote or an escaped quote. \Z, not
    # $: $ also matches before a final newline, where a backslash is literal.
    text = re.sub(r"(\\+)(?=" + quote + r"|\Z)", lambda m: m.group(1) * 2, text)
    text = text.replace(quote, "\\" + quote)
    return f"{quote}{text}{quote}"


def hydra_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return hydra_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(hydra_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_checked_key(str(k), str(k))}:{hydra_value(v)}" for k, v in value.items()) + "}"
    raise UserError(f"value {value!r} of type {type(value).__name__} cannot be passed to gym; use a string")


def _checked_key(key: str, path: str) -> str:
    if not _KEY_RE.match(key):
        raise UserError(
            f"run/prepare key {path!r} cannot be passed as a Hydra override; use letters, digits, '_' and '-'"
        )
    return key


def flatten_overrides(config: dict[str, Any], where: str = "") -> list[str]:
    """``{a: {b: 1}, c: [x]}`` -> ``["+a.b=1", "+c=['x']"]``; nested dicts become dotted keys.

    A single ``+`` adds each key, as gym documents its overrides; gym merges every
    ``+config_paths=[...]`` token (its own --model-type and --benchmark included) into one.
    """
    tokens: list[str] = []

    def walk(node: dict[str, Any], prefix: str) -> None:
        for key, value in node.items():
            dotted = f"{prefix}{_checked_key(str(key), where + prefix + str(key))}"
            if isinstance(value, dict) and value:
                walk(value, dotted + ".")
            else:
                tokens.append(f"+{dotted}={hydra_value(value)}")

    walk(config, "")
    return tokens
