"""Per-call logging controlled by ``TESSERA_LOG``.

``TESSERA_LOG=trace`` logs every call (op, shapes, dtypes, kernel, config and why it was chosen);
``TESSERA_LOG=bench`` logs, per call, a ``tessera bench …`` command line that reproduces it, as
rocBLAS's layer logging does. Several modes may be combined with commas. Output goes to stderr
through the ``tessera`` logger, so applications can redirect it with :mod:`logging`.
"""

from __future__ import annotations

import functools
import logging
import os
import sys

logger = logging.getLogger("tessera")


def modes() -> frozenset[str]:
    """The active ``TESSERA_LOG`` modes (empty when logging is off: callers skip all work)."""
    return _parse_modes(os.environ.get("TESSERA_LOG", ""))


@functools.lru_cache(maxsize=8)
def _parse_modes(raw: str) -> frozenset[str]:
    return frozenset(part.strip().lower() for part in raw.split(",") if part.strip())


class _CurrentStderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a record is emitted: test runners and notebooks
    replace it, and a handler holding the old one would write to a closed file."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)

    @property  # type: ignore[override]
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def _ensure_handler() -> None:
    if not logger.handlers:
        handler = _CurrentStderr()
        handler.setFormatter(logging.Formatter("tessera %(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False


def trace_enabled() -> bool:
    return "trace" in modes()


def bench_enabled() -> bool:
    return "bench" in modes()


def trace(message: str) -> None:
    """Log one line in ``trace`` mode (cheap no-op otherwise)."""
    if trace_enabled():
        _ensure_handler()
        logger.info("trace: %s", message)


def bench_command(command: str) -> None:
    """Log a reproducing ``tessera bench`` command line in ``bench`` mode."""
    if bench_enabled():
        _ensure_handler()
        logger.info("bench: %s", command)


def info(message: str) -> None:
    """Something the user should know even without tracing (e.g. an operand was copied)."""
    if trace_enabled():
        trace(message)
    else:
        logger.debug(message)
