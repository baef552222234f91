"""The README and the docs pages link to what exists: every relative link names a file of the
repository, and every #anchor a heading of the page it points at (GitHub's slugs). The README stays
a page a newcomer finishes: its two commands first, at most 300 lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LINK = re.compile(r"\[[^\]]+\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)  # a comment in a code block is no heading
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.*)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target):
            continue  # elsewhere: not ours to check
        file_part, _, anchor = target.partition("#")
        linked = (page.parent / file_part).resolve() if file_part else page
        assert linked.exists(), f"{page.name}: {target} names no file"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{page.name}: {target} names no heading of {linked.name}"


def test_the_readme_is_short_and_starts_with_its_two_commands() -> None:
    text = (REPO / "README.md").read_text()
    assert len(text.splitlines()) <= 300
    first_block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    assert first_block.splitlines() == ["scripts/quickstart", "scripts/test"]
