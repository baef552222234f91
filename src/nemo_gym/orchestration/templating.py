"""The one Jinja2 environment every rendered script comes from (the job's, the probes', a backend's
own parts): undefined variables are errors, every user string is shell-quoted by a filter, the
contract is ``c``. Below both ``render`` and the backends, which render their own templates with
it, so that neither reaches up into the other."""

from __future__ import annotations

import os
import tempfile
from functools import lru_cache
from typing import Any

from nemo_gym.orchestration import contract
from nemo_gym.orchestration.api import RUNTIME_ENV_PREFIX
from nemo_gym.orchestration.plan.model import COLLECTOR_STEP, DRIVER_STEP, EnvVar, Port, PortRef
from nemo_gym.orchestration.shellquote import bash_argv, bash_quote


def _export_env(var: EnvVar, host_variable: str | None = None) -> str:
    if var.kind == "lit":
        return f"export {var.key}={_quote_host(var.value, host_variable)}"
    if var.kind == "node-address":
        return f'{var.key}=$(gym_node_ip "$(gym_this_node)")\nexport {var.key}'
    if var.kind == "ported":
        assert var.port is not None
        before, _, after = var.value.partition("{port}")
        return f"export {var.key}={bash_quote(before) if before else ''}{_port(var.port)}{bash_quote(after) if after else ''}"
    # runtime: read where the step runs; host: carried by the submission's environment.
    return f'export {var.key}="${{{var.value}-}}"'


def _port(port: Port, word: bool = True) -> str:
    """A port as the script says it: the number, or the variable that holds the port claimed when
    the job started (quoted as a word of its own; bare inside a double-quoted string, ``word=False``)."""
    if isinstance(port, PortRef):
        return f'"${{{port.variable}}}"' if word else f"${{{port.variable}}}"
    return str(port)


def _quote_host(text: str, host_variable: str | None) -> str:
    """``text`` as one bash word, with every ``//runtime:VAR`` host replaced by the value of VAR
    where the script runs (driver.policy_host: runtime:VAR)."""
    if not host_variable:
        return bash_quote(text)
    marker = f"//{RUNTIME_ENV_PREFIX}{host_variable}"
    pieces = text.split(marker)
    return f'"//${{{host_variable}}}"'.join(bash_quote(p) if p else "" for p in pieces) or "''"


def _bytecode_cache(jinja2: Any) -> Any:
    """Compiled templates kept between runs: compiling them is most of a small render's time."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = os.path.join(base, "gym-orchestration", "templates")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        directory = tempfile.gettempdir()
    return jinja2.FileSystemBytecodeCache(directory)


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("nemo_gym.orchestration", "templates"),
        bytecode_cache=_bytecode_cache(jinja2),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
        # The templates are the package's own files: read once a process, not checked again before
        # each of a suite's thousand renders (a stat each).
        auto_reload=False,
        # Bash's ${#array[@]} would open a Jinja comment: comments need a marker bash never has.
        comment_start_string="<#jinja#",
        comment_end_string="#jinja#>",
    )
    env.filters["q"] = lambda v: bash_quote(str(v))
    env.filters["argv"] = bash_argv
    env.filters["export_env"] = _export_env
    env.filters["q_host"] = _quote_host
    env.filters["port"] = _port
    env.globals["c"] = contract
    env.globals["collector_step"] = COLLECTOR_STEP
    env.globals["driver_step"] = DRIVER_STEP
    return env


def render_template(name: str, **context: Any) -> str:
    return str(_environment().get_template(name).render(**context))
