"""Turn validation failures into short lines that name the YAML path and the fix."""

from __future__ import annotations

import difflib
import functools
import types
import typing
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from pydantic import BaseModel, ValidationError


class UserError(Exception):
    """A problem the user can fix; the CLI prints each line and exits non-zero, no traceback."""

    def __init__(self, problems: str | Iterable[str]):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        super().__init__("\n".join(self.problems))


class ConnectionLost(UserError):
    """The ssh connection broke while a command ran: what it did on the other side is unknown."""


def without_credentials(text: str) -> str:
    """``text`` without this shell's export credentials or any header value (an unexpected error's,
    say). Light on purpose: the CLI's last-resort handler calls it when anything else may be what
    failed to import, so it needs only the stdlib-only exporter modules."""
    import os

    from nemo_gym.orchestration.exporters.record import scrub_secrets
    from nemo_gym.orchestration.exporters.spec import SECRETS

    return scrub_secrets(text, [os.environ.get(name) for name in SECRETS])


def closest_name(word: str, names: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The name ``word`` most likely misspells, if one is close enough: for "did you mean"."""
    return _closest_name(word, tuple(names), cutoff)


@functools.lru_cache(maxsize=1024)
def _closest_name(word: str, names: tuple[str, ...], cutoff: float) -> str | None:
    # Remembered: 200 benchmarks each giving gym a key it does not read (checked against the same
    # keys) ask the same question 200 times, and difflib's answer is the costly part of a dry run.
    close = difflib.get_close_matches(word, list(names), n=1, cutoff=cutoff)
    return close[0] if close else None


# The pydantic error type of ``error_at``; ``_describe_one`` joins its ``at`` to the error's path.
AT_PATH_ERROR = "gym_config_at_path"


def error_at(path: str, message: str) -> Exception:
    """A validation error about ``path`` below the model whose validator raises it.

    A model validator's errors carry only the model's own location (``services.pd``), and a
    ``SubmitConfig`` validator's none at all; this names the exact key (``prefill.node_pool``,
    or a full path from the top), so the user reads ``services.pd.prefill.node_pool: ...``.
    The path is in the error's text too, so ``str(ValidationError)`` at the Python API names the
    key as the CLI does; the CLI joins the context's parts to the location instead.
    """
    from pydantic_core import PydanticCustomError

    # The message goes in the context, not the template: its own braces are never placeholders.
    return PydanticCustomError(AT_PATH_ERROR, "{at}: {problem}", {"at": path, "problem": message})


# Hints for required keys, by field name: what the value is.
_MISSING_HINTS = {
    "model": "the model path or Hugging Face name to serve",
    "container": "the container image the step runs in",
    "account": "the Slurm account to charge",
    "partition": "the Slurm partition of this node pool",
    "output_path": "an absolute directory on the cluster for run directories",
    "benchmarks": "a mapping of benchmark name to its run config",
    "ref": "the tag, branch or commit of NeMo Gym to install",
    "services": "a mapping of service name to service config",
    "compute": "a mapping with one compute resource",
    "driver": "the benchmark driver config",
    "job": "job: {output_path: ...}",
}

_TYPE_WORDS = {
    "int_parsing": "a whole number",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_parsing": "a number",
    "float_type": "a number",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "string_type": "a string",
    "dict_type": "a mapping (key: value lines)",
    "model_type": "a mapping (key: value lines)",
    "model_attributes_type": "a mapping (key: value lines)",
    "list_type": "a list",
}


def describe_value(value: Any) -> str:
    """A value as an error line shows it: short, a mapping or list by its kind."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if value is None:
        return "null"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _unwrap_optional(tp: Any) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return _unwrap_optional(args[0])
    return tp


def _tagged_variants(tp: Any) -> dict[str, Any] | None:
    """For ``Annotated[Union[Annotated[X, Tag('x')], ...], Discriminator]`` return {tag: X}."""
    if typing.get_origin(tp) is not typing.Annotated:
        return None
    inner, *outer_meta = typing.get_args(tp)
    if typing.get_origin(inner) not in (Union, types.UnionType):
        # A one-variant union collapses: Annotated[X, Tag('x'), Discriminator(...)].
        params = (inner, *outer_meta)
        inner_args = [typing.Annotated[params]] if outer_meta else [inner]
    else:
        inner_args = list(typing.get_args(inner))
    variants = {}
    for arg in inner_args:
        if typing.get_origin(arg) is typing.Annotated:
            cls, *meta = typing.get_args(arg)
            for m in meta:
                tag = getattr(m, "tag", None)
                if tag is not None:
                    variants[tag] = cls
    return variants or None


def _walk(root: type[BaseModel], loc: tuple[Any, ...]) -> tuple[list[str], Any, list[str]]:
    from pydantic import BaseModel

    """Follow a pydantic error location through the schema.

    Returns the user-facing path parts (union tags removed), the type at the end, and for a
    discriminated union at the end, its tag names.
    """
    parts: list[str] = []
    node: Any = root
    for item in loc:
        node = _unwrap_optional(node)
        variants = _tagged_variants(node)
        if variants is not None and item in variants:
            node = variants[item]
            continue
        if variants is not None:
            node = typing.get_args(node)[0]
        if isinstance(node, type) and issubclass(node, BaseModel):
            field = node.model_fields.get(str(item))
            node = field.annotation if field is not None else None
            if field is not None and field.metadata:
                # pydantic keeps a field's own Annotated[Union, Discriminator] metadata apart.
                params = (field.annotation, *field.metadata)
                node = typing.Annotated[params]
            parts.append(str(item))
            continue
        origin = typing.get_origin(node)
        if origin is dict:
            node = typing.get_args(node)[1]
            parts.append(str(item))
        elif origin is list:
            node = typing.get_args(node)[0]
            parts[-1:] = [f"{parts[-1]}[{item}]"] if parts else [f"[{item}]"]
        else:
            parts.append(str(item))
            node = None
    node = _unwrap_optional(node)
    variants = _tagged_variants(node)
    return parts, node, list(variants) if variants else []  # as declared: vllm, ray, vllm_pd


def _model_fields_at(node: Any) -> list[str]:
    from pydantic import BaseModel

    if isinstance(node, type) and issubclass(node, BaseModel):
        return list(node.model_fields)
    return []


def describe_validation_error(exc: ValidationError, root: type[BaseModel]) -> list[str]:
    lines: list[str] = []
    for err in exc.errors(include_url=False):
        line = _describe_one(err, root)
        if line not in lines:
            lines.append(line)
    return lines


def _describe_one(err: Any, root: type[BaseModel]) -> str:
    loc = tuple(err.get("loc", ()))
    kind = err.get("type", "")
    given = err.get("input")
    parts, node, tags = _walk(root, loc)
    if kind == AT_PATH_ERROR:
        return f"{'.'.join([*parts, err['ctx']['at']])}: {err['ctx']['problem']}"
    path = ".".join(parts)
    if kind == "extra_forbidden":
        parent_parts, parent, _ = _walk(root, loc[:-1])
        key = str(loc[-1])
        close = closest_name(key, _model_fields_at(parent))
        if close:
            return f"{path}: unknown key; did you mean '{close}'?"
        where = ".".join(parent_parts) or "the top level"
        known = ", ".join(_model_fields_at(parent))
        return f"{path}: unknown key; remove it (keys allowed in {where}: {known})"
    if kind == "missing":
        hint = _MISSING_HINTS.get(parts[-1] if parts else "", "")
        return f"{path}: required key is missing; add it" + (f" ({hint})" if hint else "")
    if kind == "union_tag_invalid":
        choices = ", ".join(tags) or str(err.get("ctx", {}).get("expected_tags", ""))
        tag = err.get("ctx", {}).get("tag")
        return f"{path}.type: {tag!r} is not a known type; use one of: {choices}"
    if kind == "union_tag_not_found":
        choices = ", ".join(tags)
        return f"{path}.type: required key is missing; set type to one of: {choices}"
    if kind in _TYPE_WORDS:
        fix = ""
        if kind == "string_type" and len(parts) >= 2 and parts[-2] == "env":
            fix = f"; write it as 'lit:{given}'"
        return f"{path}: expected {_TYPE_WORDS[kind]}, got {describe_value(given)}{fix}"
    msg = err.get("msg", "")
    if kind == "value_error" and msg.startswith("Value error, "):
        msg = msg[len("Value error, ") :]
    if kind == "assertion_error" and msg.startswith("Assertion failed, "):
        msg = msg[len("Assertion failed, ") :]
    return f"{path}: {msg}" if path else msg
