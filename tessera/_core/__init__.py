"""Shared foundations of every Tessera library: device facts, errors, validation, logging."""

from tessera._core.device import DeviceInfo, device_info, dtype_key, interpreter_enabled
from tessera._core.errors import (
    InvalidArgumentError,
    LogicFileError,
    PackError,
    TesseraError,
    UnsupportedError,
)

__all__ = [
    "DeviceInfo",
    "InvalidArgumentError",
    "LogicFileError",
    "PackError",
    "TesseraError",
    "UnsupportedError",
    "device_info",
    "dtype_key",
    "interpreter_enabled",
]
