"""Tessera: GPU math libraries written in Triton, tuned per architecture, installable with pip.

Libraries are subpackages (``tessera.blas``, …) imported on first use, so ``import tessera``
stays cheap and the CLI can choose Triton's interpreter before any kernel is defined.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__version__ = "0.1.0"

from tessera._core import (
    DeviceInfo,
    InvalidArgumentError,
    LogicFileError,
    PackError,
    TesseraError,
    UnsupportedError,
    device_info,
)
from tessera._core.launch import release_scratch

_LIBRARIES = ("blas", "rand")

__all__ = [
    "DeviceInfo",
    "InvalidArgumentError",
    "LogicFileError",
    "PackError",
    "TesseraError",
    "UnsupportedError",
    "__version__",
    "blas",
    "device_info",
    "rand",
    "release_scratch",
]


def __getattr__(name: str) -> ModuleType:
    if name in _LIBRARIES:
        return importlib.import_module(f"tessera.{name}")
    raise AttributeError(f"module 'tessera' has no attribute {name!r}")
