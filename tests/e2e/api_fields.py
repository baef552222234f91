"""Print every pydantic model of `nemo_gym.orchestration.api` with its fields as JSON: the field's
type as Python spells it (normalised) and its default. Run with each side's own Python, so that
tests/e2e/test_api_matches_upstream.py can compare NeMo Gym 0.7.0's API with ours."""

import inspect
import json
import sys
import types
import typing

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

import nemo_gym.orchestration.api as api


def type_name(annotation: object) -> str:
    """One spelling per type: Annotated metadata (tags, discriminators) dropped, unions as
    ``a | b`` with their members sorted, classes by name."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " | ".join(sorted(type_name(a) for a in args))
    if origin is typing.Literal:
        return "Literal[" + ", ".join(repr(a) for a in args) + "]"
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(type_name(a) for a in args)}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))


def default_of(field: object) -> object:
    default = field.default
    if default is PydanticUndefined:
        return "<required>" if field.default_factory is None else repr(field.default_factory())
    if isinstance(default, BaseModel):
        return default.model_dump(mode="json")
    return default if isinstance(default, (str, int, float, bool, type(None), list, dict)) else repr(default)


def defined_in_api(cls: type) -> bool:
    """0.7.0's api is one module, ours a package whose modules define what it re-exports: either
    way a model of the API, not one it imports (pydantic's BaseModel)."""
    return cls.__module__ == api.__name__ or cls.__module__.startswith(api.__name__ + ".")


models = {
    name: {
        field_name: {"type": type_name(field.annotation), "default": default_of(field)}
        for field_name, field in cls.model_fields.items()
    }
    for name, cls in vars(api).items()
    if inspect.isclass(cls) and issubclass(cls, BaseModel) and defined_in_api(cls)
}
functions = sorted(n for n in ("resolve_env_dict", "effective_ray_serve") if callable(getattr(api, n, None)))
json.dump({"models": models, "functions": functions}, sys.stdout, indent=1, sort_keys=True)
