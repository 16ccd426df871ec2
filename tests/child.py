"""Child processes that compile kernels, for tests that compile offline (as a pack build does)."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def compiler_env() -> dict[str, str]:
    """This process's environment without ``TRITON_INTERPRET`` (conftest sets it for CPU runs, and
    the interpreter patches Triton's language process-wide, so compiling needs a child without it)
    and with the repository importable."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env
