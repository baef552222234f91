"""How Python leaves this machine: the one owner of which of this package's modules run elsewhere,
and of the two forms they travel in.

A program run on a node or a submit host (the resume judge, a shard's slicing and merging, the
exporters, the view's sample reader, results' rollout projection, the Ray gateway) is a set of
this package's stdlib-only modules and the one it starts from. They travel under their own names
(``nemo_gym.orchestration.contract``), so each module imports the others exactly as it does here,
with no second way of importing for "when staged":

* **staged** into a job directory, as a package tree under ``contract.SHIPPED_DIR`` (empty
  ``__init__.py`` files for the packages: nothing of the submit side runs there) with a launcher,
  ``python3 -E -s <tree>/gym_run.py <module> ARGS``: the tree is the first place imported from,
  the current directory and ``PYTHONPATH`` are never looked in;
* **inline**, for a host's ``python3`` reading the program itself (``gym eval export``, the view,
  results): the modules' sources compressed into the program, imported from memory by a finder
  placed first, and nothing from the current directory.

Either way the module starts as ``__main__`` (``runpy``), as ``python3 -m`` would start it.
"""

from __future__ import annotations

import base64
import json
import zlib
from enum import Enum
from functools import lru_cache
from importlib import resources

from nemo_gym.orchestration import contract

PACKAGE = "nemo_gym.orchestration"
LAUNCHER = "gym_run.py"
# What each program is made of, beside its own module: the words every node-side module reads.
_WORDS = ("contract", "untrusted", "facts")
_EXPORTERS = tuple(
    f"exporters.{name}"
    for name in ("record", "spec", "jobfiles", "receipts", "mlflow_rest", "table", "wandb_export", "run_exports")
)


class Program(Enum):
    """A program that runs elsewhere: the module it starts from, and every module it imports."""

    RESUME_JUDGE = ("resume", (*_WORDS, "chain", "resume"))  # plus its backend's node module (``staged``)
    SHARDS = ("shards", ("contract", "shards"))
    EXPORTERS = ("exporters.run_exports", (*_WORDS, *_EXPORTERS))
    SAMPLES = ("samples", (*_WORDS, "samples"))
    PROJECTION = ("rollout_projection", (*_WORDS, "rollout_projection"))
    GATEWAY = (
        "gateway.ray_serve_gateway",
        ("gateway.replica", "gateway.supervision", "gateway.proxy", "gateway.ray_serve_gateway"),
    )
    # A lane's job queuing the next of its lane (plus its backend's node module, ``staged``).
    LANE_FEEDER = ("lane_feed", (*_WORDS, "chain", "resume", "lane_feed"))
    SCHEDULER_HOST = ("backends.slurm_host", ("backends.slurm_host",))  # the Slurm backend's rules on the login node
    # A warm lane's weights switch, and the guard its vLLM server imports (``--middleware``).
    WEIGHTS = ("weights", ("contract", "untrusted", "facts", "reload_guard", "weights"))
    # A shared deployment's queue: which benchmark's driver starts next, a warm lane's switches.
    SHARED_QUEUE = ("shared_queue", ("contract", "shared_queue"))
    # A job's servers' ports, claimed on its node at its start and released at its end.
    PORTS = ("ports", ("ports",))

    def __init__(self, entry: str, modules: tuple[str, ...]) -> None:
        self.entry = entry
        self.modules = modules

    @property
    def entry_module(self) -> str:
        return f"{PACKAGE}.{self.entry}"


def module_source(name: str) -> str:
    """A module of this package by its name under it (``resume``, ``backends.slurm_node``)."""
    *package, module = name.split(".")
    return resources.files(".".join([PACKAGE, *package])).joinpath(f"{module}.py").read_text()


def _packages(modules: tuple[str, ...]) -> list[str]:
    """Every package the modules sit in, outermost first (``nemo_gym``, ``nemo_gym.orchestration``, ...)."""
    found: list[str] = []
    for name in (f"{PACKAGE}.{m}" for m in modules):
        parts = name.split(".")[:-1]
        for depth in range(1, len(parts) + 1):
            package = ".".join(parts[:depth])
            if package not in found:
                found.append(package)
    return found


# -- staged: a package tree in the job directory ------------------------------------------------


_LAUNCHER_TEXT = '''\
"""Starts one module of the tree beside this file as __main__: gym_run.py MODULE ARGS."""
import runpy
import sys

if __name__ == "__main__":
    sys.argv = sys.argv[1:]
    runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
'''


def staged(program: Program, *more: str) -> dict[str, str]:
    """Job-directory path -> text of the program's tree (``more``: modules it imports by name at
    run time, the resume judge's node scheduler)."""
    modules = tuple(dict.fromkeys((*program.modules, *more)))
    files = {f"{contract.SHIPPED_DIR}/{LAUNCHER}": _LAUNCHER_TEXT}
    for package in _packages(modules):
        files[f"{contract.SHIPPED_DIR}/{package.replace('.', '/')}/__init__.py"] = ""
    for name in modules:
        files[f"{contract.SHIPPED_DIR}/{PACKAGE.replace('.', '/')}/{name.replace('.', '/')}.py"] = module_source(name)
    return files


def launch_words(program: Program, tree: str = '"$GYM_JOB_DIR"', isolated: bool = True) -> str:
    """Shell words that run the staged program of the job directory ``tree`` (a shell word).
    ``isolated``: ``PYTHON*`` variables and the user's site ignored (all but the Ray gateway, which
    imports what its container's environment provides)."""
    flags = "-E -s " if isolated else ""
    return f"python3 {flags}{tree}/{contract.SHIPPED_DIR}/{LAUNCHER} {program.entry_module}"


# -- inline: one program a host's python3 reads -------------------------------------------------------

# Imports the modules from SOURCES (name -> source; a package's is ""), never from a directory,
# and runs ENTRY as __main__. Python 3.8, stdlib only: it runs on hosts we do not install.
_INLINE = """\
import sys
sys.path[:] = [p for p in sys.path if p not in ("", ".")]  # nothing from the current directory
import base64, importlib.abc, importlib.util, json, runpy, zlib
SOURCES = json.loads(zlib.decompress(base64.b64decode("%(blob)s")).decode("utf-8"))
PACKAGES = %(packages)r


class Shipped(importlib.abc.MetaPathFinder, importlib.abc.InspectLoader):
    def find_spec(self, name, path=None, target=None):
        if name not in SOURCES:
            return None
        return importlib.util.spec_from_loader(name, self, origin="shipped:" + name, is_package=name in PACKAGES)

    def is_package(self, name):
        return name in PACKAGES

    def get_source(self, name):
        return SOURCES[name]

    def get_code(self, name):
        return compile(SOURCES[name], "shipped:" + name, "exec")


sys.meta_path.insert(0, Shipped())
runpy.run_module(%(entry)r, run_name="__main__", alter_sys=True)
"""


@lru_cache(maxsize=8)
def inline(program: Program) -> str:
    """The program as one Python source for ``python3 -`` or ``python3 -c`` (its arguments after it)."""
    packages = _packages(program.modules)
    sources = {package: "" for package in packages}
    sources.update({f"{PACKAGE}.{name}": module_source(name) for name in program.modules})
    blob = base64.b64encode(zlib.compress(json.dumps(sources).encode("utf-8"), 9)).decode("ascii")
    return _INLINE % {"blob": blob, "packages": packages, "entry": program.entry_module}
