"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path


def write_atomically(path: Path, text: str, check: Callable[[Path], object] | None = None) -> None:
    """Replace ``path`` with ``text`` all at once: written to a temporary file in the same folder,
    flushed to disk, then renamed over ``path``. With ``check``, the rename happens only if the
    written copy passes it (``check`` raises otherwise, and ``path`` is left as it was)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if check is not None:
            check(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
