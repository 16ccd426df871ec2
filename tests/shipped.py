"""The solutions that the logic files shipped in the wheel name, for tests that run each one."""

from __future__ import annotations

from typing import Any

from tessera.tuning import logic
from tessera.tuning.paths import SHIPPED_LOGIC


def shipped_solutions(library: str, op: str) -> list[tuple[str, Any]]:
    """(dtype, configuration) for each distinct solution of every shipped ``library.op`` logic
    file (all architectures), in file order."""
    return [(path.name.split(".")[2], config)
            for path in sorted(SHIPPED_LOGIC.glob(f"*/{library}.{op}.*.yaml"))
            for config in dict.fromkeys(logic.load_logic(path).solutions.values())]
