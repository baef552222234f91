"""Imports run one way (docs/architecture.md, "Layers"): a module imports only modules of its own
layer or below, and no two modules import each other, through any chain. The graph is read from
the source with ``ast`` (every import, at module level or inside a function: a lazy import is
still a dependency; one under ``if TYPE_CHECKING:`` is not). What is left of the old shape is listed here by name and may only shrink:
a new upward arrow or circle fails, and so does one that was fixed but is still listed."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

import nemo_gym.orchestration as package

ROOT = Path(package.__file__).parent
PREFIX = "nemo_gym.orchestration."

# Bottom to top. The first pattern a module's name (without the package prefix) matches decides; the
# catch-all "*" only when no other does.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    (
        "words",  # shared vocabulary, pure rules and node-side code: no I/O of the submit path
        (
            "", "contract", "chain", "facts", "untrusted", "runid", "shellquote", "display", "yamlio", "usage", "stats",
            "estimate", "rollouts", "rollout_projection", "samples", "shards", "resume", "watch_state",
            "feeding", "verbs.resubmit.recovery", "shipping", "verbs.plan.sample_size", "rules", "errors", "gym_eval_keys", "exporters", "exporters.*",
            "gateway", "gateway.*", "backends.slurm_node", "backends.slurm_host", "weights", "reload_guard", "shared_queue", "ports", "backends.*_rules", "backends.slurm_limits",
            "backends",  # the registry alone: backends by name, each imported when first asked for
        ),
    ),
    ("config", ("api", "api.*", "compose", "overrides", "resolved", "otel_destination")),
    ("plan", ("plan", "plan.*")),
    ("templates", ("templating",)),
    ("backends", ("backends", "backends.*", "connection")),
    ("render", ("render", "stage", "otel")),
    ("validation", ("validate", "preflight")),
    ("records", ("*",)),  # record, submission, observe, results, comparison, store, a verb's scripts, rules, pages
    ("library", ("library", "library.*", "verbs.*.use_case")),
    ("cli", ("cli", "cli.*", "verbs.*.command")),
]  # fmt: skip

# What is left of the old shape, by name (importer -> imported): may only shrink.
KNOWN_UPWARD: set[tuple[str, str]] = set()
KNOWN_CIRCLES = 0


def layer_of(name: str) -> int:
    short = name.removeprefix(PREFIX) if name != PREFIX.rstrip(".") else ""
    named = (
        i for i, (_, patterns) in enumerate(LAYERS) if any(fnmatch.fnmatchcase(short, p) for p in patterns if p != "*")
    )
    return next(named, next(i for i, (_, patterns) in enumerate(LAYERS) if "*" in patterns))


def modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        found[".".join((PREFIX.rstrip("."), *parts))] = path
    return found


def imports_of(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    package_parts = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    tree = ast.parse(path.read_text())
    typing_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING")
        for inner in ast.walk(node)
    }
    found = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:  # for the type checker only: no dependency when it runs
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package_parts[: len(package_parts) - node.level + 1], *([base] if base else [])])
            for alias in node.names:
                target = f"{base}.{alias.name}"
                found.add(target if target in known else base)
    return {m for m in found if m in known and m != name}


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def upward_arrows(edges: dict[str, set[str]]) -> set[tuple[str, str]]:
    short = lambda m: m.removeprefix(PREFIX)  # noqa: E731
    return {(short(a), short(b)) for a, targets in edges.items() for b in targets if layer_of(b) > layer_of(a)}


def circles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_every_module_has_a_layer() -> None:
    for name in modules():
        assert 0 <= layer_of(name) < len(LAYERS)


def test_no_new_upward_import_and_none_fixed_still_listed() -> None:
    arrows = upward_arrows(graph())
    assert arrows - KNOWN_UPWARD == set(), "new imports from a lower layer up"
    assert KNOWN_UPWARD - arrows == set(), "fixed: take them off KNOWN_UPWARD"


def test_no_new_circle() -> None:
    found = circles(graph())
    assert len(found) <= KNOWN_CIRCLES, [sorted(c) for c in found]


def test_no_verb_imports_the_dispatcher() -> None:
    """``cli/main.py`` imports every verb's ``command``: a verb that imported it back (for its error printer) made
    a circle; what verbs share is ``cli/common.py``'s."""
    for name, targets in graph().items():
        if name.startswith(PREFIX + "cli.") and name != PREFIX + "cli.main":
            assert PREFIX + "cli.main" not in targets, name
