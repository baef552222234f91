"""Labels read back (benchmark names, run ids, swept values, details, causes), made safe for where
they are shown. Anyone may have written them: a run directory is copied and shared, a record is
a file. Each surface has its own hazard:

- the terminal: control characters (``ESC]0;...BEL`` retitles it, ``ESC[31m`` recolours it), bytes
  that were not UTF-8 (kept as lone surrogates by ``surrogateescape``) and bidirectional controls
  (U+202E shows text reversed) are shown escaped, ``\\x1b``, ``\\xff``, ``\\u202e``;
- rich: the same, and its markup escaped (``[/bad]`` is a closing tag to rich, ``[a,b]`` a style);
- HTML: the same, markup left to the page's autoescape (a value marked safe, a chart drawn from
  labels escaped already, passes as it is);
- matplotlib: the same, with every ``$`` escaped (two of them start mathtext, and a label such as
  ``/ckpt/exp_$a_$/step-1000`` is no valid math).
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.text import Text

# C0 and C1 controls and DEL; lone surrogates (bytes that were not UTF-8, or a JSON "\udXXX");
# the bidirectional controls (embeddings, overrides, isolates, marks) and the line and paragraph
# separators, which reorder or break what follows them on screen.
_BEYOND_C0 = "\x7f-\x9f\ud800-\udfff\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f{_BEYOND_C0}]")
_UNSAFE_BUT_LAYOUT = re.compile(f"[\x00-\x08\x0b-\x1f{_BEYOND_C0}]")  # newline and tab kept
# What surrogateescape made of an undecodable byte: U+DC80..U+DCFF for bytes 0x80..0xFF.
_ESCAPED_BYTES = range(0xDC80, 0xDD00)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code in _ESCAPED_BYTES:
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"


def terminal(label: object) -> str:
    """One label on one line: every control character, newlines included, shown escaped."""
    return _UNSAFE.sub(_escaped, str(label))


def terminal_text(text: object) -> str:
    """Text of several lines (a message, a log header): as ``terminal``, keeping newlines and tabs."""
    return _UNSAFE_BUT_LAYOUT.sub(_escaped, str(text))


def rich(label: object) -> Text:
    """A label for rich: shown as written, never read as markup. A ``Text``, not an escaped string:
    rich's escaping doubles a trailing backslash, which then shows twice."""
    from rich.text import Text

    return Text(terminal(label))


def html(value: object) -> object:
    """A page's value (a Jinja2 ``finalize``): a text with its control and bidi characters escaped,
    newlines kept; a ``Markup`` (the page's own, or a chart) or a number as it is."""
    import markupsafe

    if isinstance(value, str) and not isinstance(value, markupsafe.Markup):
        return terminal_text(value)
    return value


def matplotlib(label: object) -> str:
    """A label for a figure: shown as written (no mathtext), without control characters (invalid in SVG)."""
    return terminal(label).replace("$", r"\$")


def echo(text: object, err: bool = False) -> None:
    """Print text made of labels read back, on the terminal's terms (``terminal_text``)."""
    print(terminal_text(text), file=sys.stderr if err else sys.stdout)


def some_of(names: list[str], shown: int = 3) -> str:
    """``a, b, c and 197 more``: a long list named in one line, so that a message said of many
    things (200 benchmarks alike) is one line and not 200."""
    head = ", ".join(names[:shown])
    return f"{head} and {len(names) - shown} more" if len(names) > shown else head
