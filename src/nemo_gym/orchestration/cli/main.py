"""The command line, installed as ``gym`` (the name NeMo Gym users know) and ``gym-orch`` (ours
alone: NeMo Gym installs a ``gym`` of its own). Each verb lives in its folder (``verbs/<verb>/``,
its arguments and output in ``command.py``); this one only dispatches.

Whatever goes wrong, the user sees short lines, never a Python traceback (set GYM_DEBUG=1 to get
one for a bug report).
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from nemo_gym.orchestration.cli.common import print_problems
from nemo_gym.orchestration.errors import UserError

COMMAND_NAMES = ("gym", "gym-orch")
DETAIL_LIMIT = 300  # characters of an error's own text shown: never a 100,000-character value whole
# What to do about an OS error, by its errno name.
OS_ERROR_FIXES = {
    "ENAMETOOLONG": "shorten the path",
    "ENOENT": "check the path",
    "EACCES": "check its permissions",
    "EPERM": "check its permissions",
    "ENOSPC": "free some space there",
    "EDQUOT": "free some space there (a quota is full)",
    "EROFS": "name a writable place",
    "EISDIR": "name a file, not a directory",
    "ENOTDIR": "a part of the path is a file, not a directory",
    "EADDRINUSE": "choose another port (--port 0 picks a free one)",
    "EADDRNOTAVAIL": "choose an address of this machine",
}
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def _never_unprintable() -> None:
    """Text read back that no encoding can print (bytes that were not UTF-8, kept as surrogates)
    comes out escaped rather than ending the command: the labels are escaped where they are
    shown, and this catches the rest (a log's lines)."""
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


def _scrubbed_detail(exc: BaseException) -> str:
    """The exception's text on one line, credentials scrubbed and escaped for the terminal. Only
    light modules (errors, display, the stdlib-only exporters) are imported, and even their failure
    is caught: whatever broke (an ImportError in a backend, say) may break them too, and this is
    the last resort that must not raise."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    try:
        from nemo_gym.orchestration.display import terminal
        from nemo_gym.orchestration.errors import without_credentials

        return terminal(without_credentials(text)) or type(exc).__name__
    except Exception:  # noqa: BLE001 - the raw text, escaped, less any credential-like variable's value
        for name, value in os.environ.items():
            if len(value) >= 8 and name.upper().endswith(("TOKEN", "PASSWORD", "KEY", "SECRET")):
                text = text.replace(value, "***")
        return text.encode("ascii", "backslashreplace").decode("ascii")


def os_error_line(exc: OSError) -> str:
    """``cannot ... PATH (File name too long): shorten the path``: the thing, the reason, the fix."""
    import errno as errno_names

    from nemo_gym.orchestration.display import terminal

    name = errno_names.errorcode.get(exc.errno or 0, "")
    path = exc.filename if isinstance(exc.filename, str) else None
    shown = "" if path is None else " " + terminal(path if len(path) <= 120 else path[:120] + "...")
    fix = OS_ERROR_FIXES.get(name, "check it and try again")
    return f"cannot use{shown} ({exc.strerror or type(exc).__name__}): {fix}"


class BoundedParser(argparse.ArgumentParser):
    """argparse's usage errors quote the value given: a 100,000-character or escape-laden value is
    cut and escaped, so the error stays one short line."""

    def error(self, message: str) -> NoReturn:
        from nemo_gym.orchestration.display import terminal

        message = terminal(message)
        super().error(message if len(message) <= DETAIL_LIMIT else message[:DETAIL_LIMIT] + "...")


# Each verb's module (``status`` holds ``list`` too), in the order ``gym eval --help`` lists them.
VERB_MODULES = {
    "submit": "submit",
    "list": "status",
    "status": "status",
    "info": "info",
    "resubmit": "resubmit",
    "results": "results",
    "compare": "compare",
    "gate": "gate",
    "plan": "plan",
    "report": "report",
    "logs": "logs",
    "cancel": "cancel",
    "export": "export",
    "watch": "watch",
    "view": "view",
    "history": "history",
}


def named_verb(argv: Sequence[str]) -> str | None:
    """The verb a command line names (``eval VERB ...``), if it names one: only its module is needed
    to parse it. Anything else (``--help``, a misspelt verb) is parsed with every verb registered."""
    return argv[1] if len(argv) >= 2 and argv[0] == "eval" and argv[1] in VERB_MODULES else None


def build_parser(prog: str = "gym", verb: str | None = None) -> argparse.ArgumentParser:
    """The whole command line; with ``verb``, only that verb's module is imported and registered
    (``gym eval submit`` pays for no other verb's arguments, nor their imports)."""
    import importlib

    from nemo_gym.orchestration import __version__

    parser = BoundedParser(prog=prog, description="Run LLM evaluations on Slurm or locally.")
    parser.add_argument("--version", action="version", version=f"gym orchestration {__version__}")
    verbs = parser.add_subparsers(dest="group", metavar="COMMAND", required=True)
    eval_parser = verbs.add_parser("eval", help="submit and manage evaluation runs")
    eval_verbs = eval_parser.add_subparsers(dest="verb", metavar="VERB", required=True)
    names = dict.fromkeys(VERB_MODULES.values()) if verb is None else [VERB_MODULES[verb]]
    for name in names:
        importlib.import_module(f"nemo_gym.orchestration.verbs.{name}.command").register(eval_verbs)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    invoked_as = os.path.basename(sys.argv[0])
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(invoked_as if invoked_as in COMMAND_NAMES else COMMAND_NAMES[0], named_verb(argv))
    args = parser.parse_args(argv)
    handler: Callable[[argparse.Namespace], int] = args.handler
    _never_unprintable()
    try:
        return handler(args)
    except UserError as exc:
        print_problems(exc.problems)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return EXIT_FAILED
    except OSError as exc:  # a file or a socket the verb met: name it and what to do, in one line
        print_problems([os_error_line(exc)])
        return EXIT_FAILED
    except Exception as exc:  # noqa: BLE001 - the promise is: never a traceback
        if os.environ.get("GYM_DEBUG"):
            traceback.print_exc()
        detail = _scrubbed_detail(exc)[:DETAIL_LIMIT]
        print(
            f"error: internal error ({type(exc).__name__}: {detail}); rerun with GYM_DEBUG=1 and report the traceback",
            file=sys.stderr,
        )
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
