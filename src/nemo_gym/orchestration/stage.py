"""Write a staged run to a local directory, with the modes it is uploaded with."""

from __future__ import annotations

import os
from pathlib import Path

from nemo_gym.orchestration.render import StagedRun


def write_staged(staged: StagedRun, directory: str | Path) -> Path:
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    for rel, staged_file in sorted(staged.files.items()):
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(staged_file.content)
        os.chmod(path, staged_file.mode)
    return root
