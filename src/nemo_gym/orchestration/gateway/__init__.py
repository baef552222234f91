"""The Ray gateway that fronts several vLLM replicas (``use_ray_serve``).

``ray_serve_gateway.py`` is a standalone script: it is staged into the job directory and run with
the container's ``python3``, which needs only ``ray`` and ``aiohttp``. Nothing here imports it.
"""

from __future__ import annotations

from pathlib import Path

SCRIPT_NAME = "ray_serve_gateway.py"


def script_path() -> Path:
    """The gateway script's source file, to copy into the staged job directory."""
    return Path(__file__).with_name(SCRIPT_NAME)


def script_text() -> str:
    return script_path().read_text()
