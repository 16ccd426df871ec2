"""The ``tessera`` command line (also ``python -m tessera``)."""

from tessera.cli.main import main

__all__ = ["main"]
