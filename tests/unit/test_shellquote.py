"""bash_quote: each string reaches bash as itself, and the script stays shellcheck-clean (a
hypothesis run found `export X=then`, valid bash that shellcheck reads as a misplaced `then`, and `export X==`)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from nemo_gym.orchestration.shellquote import _RESERVED, bash_quote

SAMPLES = sorted(_RESERVED) + [
    "plain",
    "",
    "a b",
    "it's",
    "$HOME",
    "`x`",
    "tab\there",
    "line\nbreak",
    "ü",
    "!",
    "{",
    "[[",
    "=",
    "==x",
    "='",
]


@pytest.mark.parametrize("value", SAMPLES)
def test_every_value_arrives_unchanged(value: str) -> None:
    script = f"export X={bash_quote(value)}\nprintf '%s' \"$X\"\nprintf '|%s' {bash_quote(value)}\n"
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout
    assert out == f"{value}|{value}"


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (scripts/test installs it)")
def test_scripts_with_any_of_them_are_shellcheck_clean() -> None:
    lines = ["#!/bin/bash"] + [f"export X{i}={bash_quote(v)}\necho {bash_quote(v)}" for i, v in enumerate(SAMPLES)]
    proc = subprocess.run(
        ["shellcheck", "-s", "bash", "-"], input="\n".join(lines) + "\n", text=True, capture_output=True
    )
    assert proc.returncode == 0, proc.stdout
