"""Helpers every command shares."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch

from tessera._core.files import write_atomically


def use_interpreter_without_gpu() -> bool:
    """Turn on Triton's interpreter when there is no GPU; True when it is on."""
    if not torch.cuda.is_available():
        os.environ.setdefault("TRITON_INTERPRET", "1")
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """``data`` as indented JSON, written atomically (never a half-written file)."""
    write_atomically(path, json.dumps(data, indent=1) + "\n")
