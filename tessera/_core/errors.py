"""One error hierarchy for every Tessera library.

Each class also derives from the builtin exception users already catch, so code written against
SciPy, CuPy or torch keeps working: ``InvalidArgumentError`` is a ``ValueError``,
``UnsupportedError`` a ``NotImplementedError``.
"""

from __future__ import annotations


class TesseraError(Exception):
    """Base class of every error Tessera raises on purpose."""


class InvalidArgumentError(TesseraError, ValueError):
    """An argument is wrong: its message names it, what it was, and what was expected."""


class UnsupportedError(TesseraError, NotImplementedError):
    """A valid request Tessera does not implement; the message says what is supported."""


class LogicFileError(TesseraError):
    """A logic (tuning) file is malformed: the message names the file and the field."""


class PackError(TesseraError):
    """A pack cannot be built, checked, installed or rolled back."""


def invalid(arg: str, actual: object, expected: str) -> InvalidArgumentError:
    """Build the standard message: ``<arg> must be <expected> (actual: <actual>)``."""
    return InvalidArgumentError(f"{arg} must be {expected} (actual: {actual})")
