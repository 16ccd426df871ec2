"""Tuning machinery shared by every library: logic files, the tuner, packs and their precompiled kernels."""

from tessera.tuning.logic import (
    LogicFile,
    Match,
    load_logic,
    logic_for,
    register_op,
    reload,
)

__all__ = ["LogicFile", "Match", "load_logic", "logic_for", "register_op", "reload"]
