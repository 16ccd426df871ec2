"""Precompiled kernels of the installed pack, found by exact specialization and loaded without compiling.

A pack built with ``--precompile`` holds, for each binary, ``kernels/<stem>.cubin|hsaco``, Triton's
metadata ``kernels/<stem>.json`` and ``kernels/<stem>.launch.json``: the kernel's name and the
digest of the specialization it was compiled for (``tessera._core.launch.specialization_digest``
over what Triton's own binder derives from a representative launch). On a launch cache miss the
:class:`~tessera._core.launch.Launcher` computes the same digest for the actual arguments; an equal
digest means the binary is exactly what Triton's JIT would compile, so it is loaded into a
``CompiledKernel`` directly: no Triton compilation, no hashing of Triton's own library. Any other
specialization (odd sizes, misaligned pointers, another configuration) goes through the JIT.
"""

from __future__ import annotations

import functools
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tessera._core import log
from tessera.tuning import logic
from tessera.tuning.paths import install_root

SIDECAR = ".launch.json"


@dataclass(frozen=True)
class Binary:
    function: str  # module:name of the @triton.jit function
    digest: str
    binary: Path
    metadata: Path
    hash: str
    sidecar: Path


@functools.lru_cache(maxsize=4)
def _index(kernels: Path, _generation: int) -> dict[str, dict[str, Binary]]:
    index: dict[str, dict[str, Binary]] = {}
    for sidecar in sorted(kernels.glob(f"*{SIDECAR}")) if kernels.is_dir() else ():
        try:
            entry = json.loads(sidecar.read_text())
            binary = Binary(entry["function"], entry["digest"], kernels / entry["binary"],
                            kernels / entry["metadata"], entry["hash"], sidecar)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            warnings.warn(f"ignoring precompiled kernel {sidecar}: {exc}", stacklevel=3)
            continue
        index.setdefault(binary.function, {})[binary.digest] = binary
    return index


def installed() -> dict[str, dict[str, Binary]]:
    """function name → specialization digest → binary, for the active pack (re-read after installs)."""
    return _index(install_root() / "current" / "kernels", logic.generation())


def has_function(function: str) -> bool:
    return function in installed()


def load(kernel: Any, digest: str, signature: dict, constants: dict, attrs: dict) -> Any:
    """The ``CompiledKernel`` for ``digest`` from the pack, or None when the pack has no such binary."""
    from tessera._core.launch import function_name

    found = installed().get(function_name(kernel), {}).get(digest)
    if found is None:
        return None
    from triton.compiler import ASTSource, CompiledKernel

    source = ASTSource(kernel, signature, constants, attrs)
    group = {found.metadata.name: str(found.metadata), found.binary.name: str(found.binary)}
    log.trace(f"launch {found.function}: precompiled {found.binary.name} from the installed pack")
    return CompiledKernel(source, group, found.hash)


def prepare() -> tuple[int, list[str]]:
    """Load every binary of the active pack on the current GPU once, so the launcher stubs Triton
    builds per signature (a C compile, cached in Triton's cache directory) exist before the first
    call. Run after an install on the machine that will use the pack. Returns (loaded, problems)."""
    import importlib

    from triton.compiler import ASTSource, CompiledKernel

    loaded, problems = 0, []
    for function, binaries in installed().items():
        module, name = function.split(":")
        try:
            kernel = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            problems.append(f"{function}: {exc}")
            continue
        for found in binaries.values():
            try:
                entry = json.loads(found.sidecar.read_text())
                source = ASTSource(kernel, entry["signature"],
                                   {tuple(path): value for path, value in entry["constants"]},
                                   {tuple(path): value for path, value in entry["attrs"]})
                group = {found.metadata.name: str(found.metadata), found.binary.name: str(found.binary)}
                CompiledKernel(source, group, found.hash).run  # noqa: B018 - loads it and builds the stub
                loaded += 1
            except Exception as exc:  # noqa: BLE001 - report every binary that cannot be loaded here
                problems.append(f"{found.binary.name}: {type(exc).__name__}: {exc}")
    return loaded, problems
