"""YAML through libyaml when it is there (several times faster than PyYAML's pure-Python code)."""

from __future__ import annotations

from typing import Any

import yaml

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class DuplicateKey(ValueError):
    """A key written twice in one mapping, which YAML loaders silently resolve to the last one."""

    def __init__(self, key: str, first_line: int, second_line: int) -> None:
        self.key, self.line = key, second_line
        shown = key if len(key) <= 80 else key[:80] + "..."
        super().__init__(
            f"the key {shown!r} appears twice in the same mapping (lines {first_line} and {second_line}); keep one"
        )


def load_yaml(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader


def load_yaml_unique(text: str) -> Any:
    """``load_yaml``, refusing a key written twice in one mapping (``DuplicateKey``, naming both
    lines): a gate policy whose second ``b:`` silently replaced the first would decide otherwise
    than it reads. The text is parsed once: its nodes are checked, then built into values."""
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        reject_duplicate_keys(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def reject_duplicate_keys(root: yaml.Node) -> None:
    stack = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode):
                    line = key.start_mark.line + 1
                    if key.value in seen:
                        raise DuplicateKey(key.value, seen[key.value], line)
                    seen[key.value] = line
                stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def dump_yaml(data: Any) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False)
