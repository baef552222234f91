"""The README and the docs pages, as the tests that keep their examples true read them."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def page(name: str) -> str:
    """``README.md``, or a page of ``docs/`` by its file name (``statistics.md``)."""
    return (REPO / name if name == "README.md" else REPO / "docs" / name).read_text()
