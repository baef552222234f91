"""Small modules (under 600 lines) and functions (under 50): a new one over either fails. What is
left of the old shape is listed by name and may only shrink (a listed one made small must leave
the list); docs/architecture.md says where each is going."""

from __future__ import annotations

import ast
from pathlib import Path

import nemo_gym.orchestration as package

ROOT = Path(package.__file__).parent
MODULE_LINES = 600
FUNCTION_LINES = 50

KNOWN_LARGE_MODULES: set[str] = set()
KNOWN_LONG_FUNCTIONS: set[tuple[str, str]] = set()


def sources() -> dict[str, str]:
    return {str(p.relative_to(ROOT)): p.read_text() for p in sorted(ROOT.rglob("*.py"))}


def test_no_module_grows_past_600_lines() -> None:
    large = {name for name, text in sources().items() if len(text.splitlines()) > MODULE_LINES}
    assert large - KNOWN_LARGE_MODULES == set(), "split it"
    assert KNOWN_LARGE_MODULES - large == set(), "made small: take it off the list"


def test_no_function_grows_past_50_lines() -> None:
    long = set()
    for name, text in sources().items():
        for node in ast.walk(ast.parse(text)):
            function = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            if function and (node.end_lineno or node.lineno) - node.lineno + 1 > FUNCTION_LINES:
                long.add((name, node.name))
    assert long - KNOWN_LONG_FUNCTIONS == set(), "cut it into functions whose names say what they do"
    assert KNOWN_LONG_FUNCTIONS - long == set(), "made short: take it off the list"
