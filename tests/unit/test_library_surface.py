"""The library's public surface and the command line's one door into it: ``library.__all__`` names
what exists and what the CLI uses; every module under ``cli/`` and each verb's ``command`` imports only the library, the errors
and the display helpers of this package; a use case exists once, for a set of runs."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from nemo_gym.orchestration import library

PACKAGE = Path(library.__file__).resolve().parents[1]
CLI_MODULES = sorted((PACKAGE / "cli").glob("*.py")) + sorted((PACKAGE / "verbs").glob("*/command.py"))
# What the CLI may import of this package: the library, the errors, the label escaping it shows
# things with and the history's words it shares with the view (display.py and verbs/history/words.py are
# presentation only), its own modules, and the package's version.
CLI_MAY_IMPORT = {
    "nemo_gym.orchestration.library",
    "nemo_gym.orchestration.errors",
    "nemo_gym.orchestration.display",
    "nemo_gym.orchestration.verbs.history.words",
}
# Of what the library offers, what only Python callers use (the CLI reaches these through the
# values the use cases return, or not at all).
FOR_PYTHON_CALLERS = {
    "CancelReport",
    "Checkpoint",
    "Combination",
    "ExportResult",
    "GatePolicy",
    "Plan",
    "Remedy",
    "RunLog",
}


def imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names imported from it) of every import in the file, type-checking ones included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
    return found


def library_names_the_cli_uses() -> set[str]:
    names = set()
    for path in CLI_MODULES:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "nemo_gym.orchestration.library":
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "library":
                names.add(node.attr)
    return names


def test_every_name_in_all_exists() -> None:
    missing = [name for name in library.__all__ if not hasattr(library, name)]
    assert not missing
    assert len(library.__all__) == len(set(library.__all__))


def test_all_is_what_the_cli_uses_and_what_python_callers_need() -> None:
    used = library_names_the_cli_uses()
    assert used - set(library.__all__) == set(), "the CLI uses a name the library does not export"
    assert set(library.__all__) - used == FOR_PYTHON_CALLERS


@pytest.mark.parametrize("path", CLI_MODULES, ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_cli_imports_only_the_library_errors_and_display(path: Path) -> None:
    wrong = []
    for module, names in imports(path):
        top = module.split(".")[0]
        command = module.startswith("nemo_gym.orchestration.verbs.") and module.endswith(".command")
        if module.startswith("nemo_gym.orchestration.cli") or command or module in CLI_MAY_IMPORT:
            continue
        if module == "nemo_gym.orchestration" and names == ["__version__"]:
            continue
        if top in sys.stdlib_module_names or top == "rich":  # rich: the --watch view
            continue
        wrong.append(module)
    assert not wrong, f"{path.relative_to(PACKAGE)} imports {wrong}"


def test_no_library_module_is_named_like_a_public_name_or_another_module() -> None:
    """A submodule named like a function the package re-exports is shadowed by it
    (``library.submit`` would be the function, and ``mock.patch("...library.submit.X")`` fail);
    one named like a module of the package or the standard library is a second module of that name."""
    import importlib
    import pkgutil

    submodules = [m.name for m in pkgutil.iter_modules(library.__path__)]
    package_modules = {m.name for m in pkgutil.iter_modules([str(PACKAGE)])}
    assert submodules
    for name in submodules:
        assert name not in library.__all__, f"library/{name}.py is shadowed by library.{name}"
        assert name not in package_modules, f"library/{name}.py and {name}.py are both modules called {name}"
        assert name not in sys.stdlib_module_names, f"library/{name}.py is called like the standard library's {name}"
        module = importlib.import_module(f"{library.__name__}.{name}")
        assert getattr(library, name) is module


@pytest.mark.parametrize("module", ["library", "verbs/*/use_case", "submission", "observe", "verbs/submit/command"])
def test_no_use_case_has_a_one_and_a_many_twin(module: str) -> None:
    """A use case takes a set of runs: no ``x`` beside ``x_runs``, ``x_of_runs`` or ``x_sweep``."""
    files = (
        sorted((PACKAGE / module).glob("*.py")) if (PACKAGE / module).is_dir() else sorted(PACKAGE.glob(f"{module}.py"))
    )
    assert files
    defined = {
        node.name
        for path in files
        for node in ast.parse(path.read_text()).body
        if isinstance(node, (ast.FunctionDef, ast.ClassDef))
    }
    twins = [
        (name, name + suffix)
        for name in defined
        for suffix in ("_runs", "_of_runs", "_sweep")
        if name + suffix in defined
    ]
    assert not twins
