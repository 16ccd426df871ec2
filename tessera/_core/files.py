"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path


def write_atomically(path: Path, text: str | bytes, check: Callable[[Path], object] | None = None) -> None:
    """Replace ``path`` with ``text`` (or bytes) all at once: written to a temporary file in the same
    folder, flushed to disk, then renamed over ``path``. With ``check``, the rename happens only if
    the written copy passes it (``check`` raises otherwise, and ``path`` is left as it was)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")  # one a writer, threads too
    try:
        with open(tmp, "wb" if isinstance(text, bytes) else "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if check is not None:
            check(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
