"""Tuning machinery shared by every library: logic files (and, to come, the tuner and packs)."""

from tessera.tuning.logic import (
    LogicFile,
    Match,
    load_logic,
    logic_for,
    register_op,
    reload,
)

__all__ = ["LogicFile", "Match", "load_logic", "logic_for", "register_op", "reload"]
