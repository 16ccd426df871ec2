"""Helpers every command shares."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch


def use_interpreter_without_gpu() -> bool:
    """Turn on Triton's interpreter when there is no GPU; True when it is on."""
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """Write to a temporary file in the same directory, then rename: never a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, indent=1) + "\n")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
