"""Where Tessera keeps what it installs: ``TESSERA_HOME`` or the platform's user data directory."""

from __future__ import annotations

import os
from pathlib import Path

SHIPPED_LOGIC = Path(__file__).resolve().parents[1] / "logic"


def install_root() -> Path:
    """The root every install writes under (nothing is ever written outside it)."""
    home = os.environ.get("TESSERA_HOME")
    if home:
        return Path(home).expanduser().resolve()
    try:
        import platformdirs
    except ImportError:  # a dependency, but GPU images run Tessera from a path: use the XDG default
        return Path(os.environ.get("XDG_DATA_HOME") or "~/.local/share").expanduser() / "tessera"
    return Path(platformdirs.user_data_dir("tessera", appauthor=False))


def cache_root() -> Path:
    """``<root>/cache``: what Tessera derives and may rebuild at any time — the kernel cache,
    parsed logic files, source fingerprints (deleting it only costs time)."""
    return install_root() / "cache"


def installed_logic() -> Path:
    """Logic of the active installed pack (``<root>/current`` is the active pack)."""
    return install_root() / "current" / "logic"
