"""Backends: what runs a plan's jobs (Slurm, Kubernetes, this machine). Each one is a module here with a
``Backend`` subclass, registered below by the compute ``type`` it runs.

Adding one means a module, its template of shell fragments ``templates/backend-<name>.sh.j2`` (the
macros ``Backend.template`` lists) and one line in ``_REGISTRY``; and, since the compute models are
the config spec, its compute model in ``api.ComputeConfig``.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from nemo_gym.orchestration.api import AnyComputeConfig
    from nemo_gym.orchestration.backends.base import Backend, SchedulerView

__all__ = ["Backend", "SchedulerView", "backend_for", "backend_named", "backend_names"]

# compute type -> "module:class"; imported on first use, so a command loads only its own backend.
_REGISTRY = {
    "slurm": "nemo_gym.orchestration.backends.slurm:SlurmBackend",
    "local": "nemo_gym.orchestration.backends.local:LocalBackend",
    "kubernetes": "nemo_gym.orchestration.backends.kubernetes:KubernetesBackend",
}
_LOADED: dict[str, Backend] = {}


def __getattr__(name: str) -> Any:
    """``Backend`` and ``SchedulerView``, from ``base`` when asked for: the registry itself imports
    no backend, so the config models can name backends without importing them (and base, which
    reads the models, never imports itself back through the registry)."""
    if name in ("Backend", "SchedulerView"):
        return getattr(import_module("nemo_gym.orchestration.backends.base"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def backend_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def backend_named(name: str) -> Backend:
    """The backend of this name: a compute ``type``, and the ``executor`` of a submission record."""
    if name not in _LOADED:
        if name not in _REGISTRY:
            raise KeyError(f"no backend {name!r}; known: {', '.join(_REGISTRY)}")
        module, cls = _REGISTRY[name].split(":")
        _LOADED[name] = getattr(import_module(module), cls)()
    return _LOADED[name]


def backend_for(compute: AnyComputeConfig) -> Backend:
    """The backend that runs a validated compute config (by its ``type``)."""
    return backend_named(compute.type)
