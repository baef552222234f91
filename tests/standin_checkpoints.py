"""Stand-in checkpoints for warm lanes (#40): the files a reload checks (config.json, one
safetensors file) and the stand-in vLLM's quality file, so each run's answers say which weights
gave them."""

from __future__ import annotations

import json
import struct
from pathlib import Path

CONFIG = {"architectures": ["StandinForCausalLM"], "model_type": "standin", "hidden_size": 8, "vocab_size": 32}


def checkpoint(root: Path, step: int, accuracy: float, torn: bool = False) -> str:
    """A stand-in checkpoint ``root/step-<step>``: whole, or ``torn`` (its safetensors header says
    more bytes than the file holds, which the job's check refuses before the server is asked)."""
    path = root / f"step-{step}"
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(CONFIG))
    (path / "standin-accuracy").write_text(f"{accuracy}\n")
    header = json.dumps({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
    body = b"\0" * (0 if torn else 8)
    (path / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + body)
    return str(path)
