"""Quote strings for bash so that each reaches its program as exactly one, unchanged argument.

Plain single quotes where they suffice; ANSI-C ``$'...'`` where the string holds a quote, a
``$``, a backquote or a control character, which reads better than ``'"'"'`` chains and keeps
shellcheck from flagging intentional literals.
"""

from __future__ import annotations

import functools
import re
import shlex

# A backslash is literal in plain single quotes, but shellcheck reads '\' as a bungled escape (SC1003).
_NEEDS_ANSI_C = re.compile(r"['$`\\\x00-\x1f\x7f]")
_ESCAPES = {"\\": "\\\\", "'": "\\'", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


# Bash's reserved words are safe unquoted as arguments (`export X=then` is fine), but shellcheck
# reads them as syntax: quote them, so that every rendered script stays clean.
_RESERVED = frozenset(
    [
        "case",
        "coproc",
        "do",
        "done",
        "elif",
        "else",
        "esac",
        "fi",
        "for",
        "function",
        "if",
        "in",
        "select",
        "then",
        "time",
        "until",
        "while",
    ]
)


# Remembered: the jobs of a suite or a sweep quote the same words (21,200 calls for 200 benchmarks).
@functools.lru_cache(maxsize=4096, typed=True)
def bash_quote(value: str) -> str:
    if not value or not _NEEDS_ANSI_C.search(value):
        # Reserved words and a leading "=" are literal to bash, but shellcheck reads them as syntax
        # (`export X=then`, `export X==`): plain single quotes keep every script clean.
        if value in _RESERVED or value.startswith("="):
            return f"'{value}'"
        return shlex.quote(value)
    out = []
    for ch in value:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ord(ch) < 32 or ord(ch) == 127:
            out.append(f"\\x{ord(ch):02x}")
        else:
            out.append(ch)
    return "$'" + "".join(out) + "'"


def bash_argv(args: object) -> str:
    return " ".join(bash_quote(str(a)) for a in args)  # type: ignore[attr-defined]
