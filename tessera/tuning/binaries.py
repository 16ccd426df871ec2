"""Precompiled kernels of the installed pack, found by exact specialization and loaded without compiling.

A pack built with ``--precompile`` holds, for each binary, ``kernels/<stem>.cubin|hsaco``, Triton's
metadata ``kernels/<stem>.json`` and ``kernels/<stem>.launch.json``: the kernel's name, the launch
key of the representative launch it was compiled for (``tessera._core.launch.launch_key``) and the
specialization Triton's own binder derived for it (signature, constants, attributes); ``<stem>`` is
a digest of the kernel and its launch key (:func:`stem`), so that a launch finds its binary by one
file test, and ``kernels/source`` holds the source fingerprint (below) alone (packs built before
the fifty-first session name binaries by solution and are read through ``kernels/index.json`` and
the manifest: ~1 MB of JSON parsed in the first call). On a launch
cache miss the :class:`~tessera._core.launch.Launcher` looks its own key up; an equal key means
Triton would specialize the launch identically, so the binary is exactly what its JIT would compile,
and it is loaded into a ``CompiledKernel`` directly: no Triton compilation, no specialization pass,
no hashing of Triton's library. Any other launch (odd sizes, misaligned pointers, a grid smaller
than the GPU for the persistent family, another configuration) goes through the JIT. The pack is
tied to the arch and Triton version it was built with (``pack install`` checks both), and its
binaries to the Tessera source they were compiled from (:func:`source_fingerprint`): a launch
key names a kernel and its arguments, not its code, so after an upgrade that changed a kernel's
body the old binary would still match and run the old code. ``pack install`` refuses such a pack,
and a pack installed before an upgrade has its binaries ignored (a warning; calls compile).

The kernel cache holds, in the same format, every binary Triton's JIT compiled for a launch on
this machine (:func:`remember`), so that later processes load it as a pack's (:func:`load`)
instead of paying Triton's ~0.5 s first launch (most of it hashing Triton's library) even when
Triton's own cache is warm. It lives under ``<TESSERA_HOME>/cache/<backend>-<arch>-triton<version>-
<source fingerprint>/``, one binary, metadata and sidecar a launch named by a digest of its
kernel and launch key (a lookup is one file test, however many entries), the sidecar written
last and atomically so that a reader never sees half an entry; another Triton, arch or Tessera
source is another folder. On by default since its GPU test passed (``test_gpu_kernel_cache_first_call``,
forty-fifth session, an H100); ``TESSERA_KERNEL_CACHE=0`` turns it off; the tuner never fills it
(its candidates would crowd it).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import time
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tessera._core import log
from tessera._core.files import write_atomically
from tessera.tuning import logic
from tessera.tuning.paths import cache_root, install_root

SIDECAR = ".launch.json"


@dataclass(frozen=True)
class Binary:
    """One precompiled kernel: its lookup fields, and its files by name in ``folder`` (paths are
    made only for the binary a launch loads: building 3000 ``Path`` objects for a pack of 1005
    binaries cost a fresh process ~90 ms on the CI machine, 2.4 ms without; the H200's first call
    with such a pack had grown to 0.55× torch's, fiftieth session)."""

    function: str  # module:name of the @triton.jit function
    launch_key: str
    folder: Path
    binary_name: str
    metadata_name: str
    hash: str
    sidecar_name: str

    @property
    def binary(self) -> Path:
        return self.folder / self.binary_name

    @property
    def metadata(self) -> Path:
        return self.folder / self.metadata_name

    @property
    def sidecar(self) -> Path:
        return self.folder / self.sidecar_name


INDEX = "index.json"  # every sidecar's lookup fields in one file: the first load reads one file
INDEX_FIELDS = ("function", "launch_key", "binary", "metadata", "hash")


def index_document(sidecars: dict[str, bytes]) -> bytes:
    """``kernels/index.json`` for a pack: sidecar file name → its lookup fields (a pack of 533
    binaries made the first call read and parse 533 sidecars before it found one)."""
    entries = {}
    for name, data in sorted(sidecars.items()):
        entry = json.loads(data)
        entries[name] = {field: entry[field] for field in INDEX_FIELDS}
    return json.dumps({"format": 1, "sidecars": entries}, sort_keys=True).encode()


def _entries(kernels: Path) -> list[tuple[str, dict[str, Any]]]:
    """(sidecar file name, its lookup fields) for every binary: from the index when the pack has
    one, else from the sidecars themselves (packs built before the index)."""
    index = kernels / INDEX
    if index.is_file():
        return list(json.loads(index.read_text())["sidecars"].items())
    entries = []
    for sidecar in sorted(kernels.glob(f"*{SIDECAR}")):
        try:
            entries.append((sidecar.name, json.loads(sidecar.read_text())))
        except (OSError, ValueError, RecursionError) as exc:
            warnings.warn(f"ignoring precompiled kernel {sidecar}: {exc}", stacklevel=4)
    return entries


@functools.lru_cache(maxsize=4)
def _index(kernels: Path, _generation: int) -> dict[str, dict[str, Binary]]:
    index: dict[str, dict[str, Binary]] = {}
    try:
        entries = _entries(kernels) if kernels.is_dir() else []
    except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError) as exc:
        warnings.warn(f"ignoring the precompiled kernels in {kernels}: unreadable index ({exc})",
                      stacklevel=3)
        return index
    for sidecar, entry in entries:
        try:
            binary = Binary(entry["function"], entry["launch_key"], kernels, entry["binary"],
                            entry["metadata"], entry["hash"], sidecar)
        except (KeyError, TypeError) as exc:
            warnings.warn(f"ignoring precompiled kernel {kernels / sidecar}: {exc}", stacklevel=3)
            continue
        index.setdefault(binary.function, {})[binary.launch_key] = binary
    return index


@functools.cache
def source_fingerprint() -> str:
    """sha256 of the running Tessera's Python files (each relative path and its bytes), once a
    process: the kernel code a pack's binaries were compiled from, recorded in its manifest as
    ``runtime.tessera_source``. Any edit changes it, so a pack is rebuilt per Tessera release, as
    vendor library files are per runtime version. Kept by the files' metadata
    (:func:`fingerprint_of`): reading every file cost the first call with a pack 12 ms on an
    H100's host (fiftieth session)."""
    return fingerprint_of(Path(__file__).resolve().parents[1], cache_root() / "source")


SETTLED_S = 2.0  # a file changed this recently may change again within its mtime's resolution


def fingerprint_of(package: Path, memo_folder: Path) -> str:
    """sha256 over ``package``'s ``*.py`` files (relative path and bytes). The digest is kept in
    ``memo_folder`` under a name made of every file's path, size, modification and change times
    and inode, as Python trusts a ``.pyc`` by its source's size and mtime; the change time cannot be
    set back by a user, so an edit or a copy is another name and the files are read again. No
    digest is kept while a file is younger than ``SETTLED_S`` (an edit within the clock's
    resolution could keep its times, as git's "racy" index entries). The memo only saves time:
    unreadable or unwritable, the files are read."""
    names = []
    for folder, subfolders, files in os.walk(package):  # a third of rglob's time
        subfolders[:] = [name for name in subfolders if name != "__pycache__"]
        where = os.path.relpath(folder, package).replace(os.sep, "/")
        names += [name if where == "." else f"{where}/{name}" for name in files if name.endswith(".py")]
    names.sort()
    paths = [package / name for name in names]
    stats = [path.stat() for path in paths]
    state = hashlib.sha256("\0".join(f"{name}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:{st.st_ino}"
                                     for name, st in zip(names, stats, strict=True)).encode())
    memo = memo_folder / state.hexdigest()
    with contextlib.suppress(OSError, UnicodeDecodeError):
        kept = memo.read_text()
        if len(kept) == 64 and all(c in "0123456789abcdef" for c in kept):
            return kept
    digest = hashlib.sha256()
    for name, path in zip(names, paths, strict=True):
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    newest = max((max(st.st_mtime_ns, st.st_ctime_ns) for st in stats), default=0)
    if time.time_ns() - newest > SETTLED_S * 1e9:
        with contextlib.suppress(OSError):
            write_atomically(memo, digest.hexdigest())
    return digest.hexdigest()


def built_from(manifest: dict[str, Any]) -> str | None:
    """The Tessera source fingerprint a pack's manifest records (None: built before it did)."""
    runtime = manifest.get("runtime")
    return runtime.get(SOURCE_FIELD) if isinstance(runtime, dict) else None


SOURCE_FIELD = "tessera_source"


SOURCE_MEMBER = "source"  # kernels/source: the source fingerprint alone (the manifest is ~0.5 MB)


def installed() -> dict[str, dict[str, Binary]]:
    """function name → launch key → binary, every one of the active pack (re-read after installs;
    what ``prepare`` and ``pack`` listings walk); none when the pack's binaries were compiled from
    another Tessera source (a warning says so). A launch looks its binary up by name instead
    (:func:`load`)."""
    generation = logic.generation()
    kernels, _ = _active(install_root() / "current", generation)
    return {} if kernels is None else _index(kernels, generation)


@functools.lru_cache(maxsize=4)
def _active(pack: Path, generation: int) -> tuple[Path | None, bool]:
    """The active pack's kernel folder if this Tessera source compiled its binaries (else None,
    warned), and whether its files are named by launch (:func:`stem`; packs built since the
    fifty-first session, which also hold ``kernels/source``), so that a launch's binary is one
    file test. Older packs are read through their index, their manifest for the source: parsing
    both (~1 MB of JSON) cost the first call with a pack ~8 ms on the CI machine."""
    kernels = pack / "kernels"
    if not kernels.is_dir():
        return None, False
    named_by_launch = (kernels / SOURCE_MEMBER).is_file()
    try:
        built = ((kernels / SOURCE_MEMBER).read_text().strip() if named_by_launch
                 else built_from(json.loads((pack / "manifest.json").read_text())))
    except (OSError, ValueError, RecursionError, KeyError, TypeError, AttributeError):
        built = None
    if built != source_fingerprint():
        what = f"Tessera source {built[:12]}" if built else "a Tessera that did not record its source"
        message = (f"ignoring the precompiled kernels of the installed pack {pack.resolve().name}: compiled "
                   f"from {what}, not this one ({source_fingerprint()[:12]}), so they could run old kernel "
                   f"code; calls compile instead. Rebuild the pack (`tessera pack build --precompile`) "
                   f"and install it")
        warnings.warn(message, stacklevel=4)
        log.trace(message)
        return None, False
    return kernels, named_by_launch


def _in_pack(function: str, key: str) -> Binary | None:
    """The active pack's binary for this launch, or None."""
    generation = logic.generation()
    kernels, named_by_launch = _active(install_root() / "current", generation)
    if kernels is None:
        return None
    if named_by_launch:
        return _named(kernels, function, key)
    return _index(kernels, generation).get(function, {}).get(key)


def _named(folder: Path, function: str, key: str) -> Binary | None:
    """The binary of ``folder`` named by this launch (:func:`stem`), or None: absent, unreadable,
    or another launch's (a digest collision)."""
    sidecar = folder / f"{stem(function, key)}{SIDECAR}"
    try:
        entry = json.loads(sidecar.read_text())
        found = Binary(entry["function"], entry["launch_key"], folder, entry["binary"], entry["metadata"],
                       entry["hash"], sidecar.name)
    except (OSError, ValueError, RecursionError, KeyError, TypeError):
        return None
    return found if (found.function, found.launch_key) == (function, key) else None


def _source(kernel: Any, found: Binary) -> Any:
    """Triton's ``ASTSource`` for a binary, rebuilt from its sidecar (its launcher needs it)."""
    from triton.compiler import ASTSource

    entry = json.loads(found.sidecar.read_text())
    return ASTSource(kernel, entry["signature"], {tuple(path): value for path, value in entry["constants"]},
                     {tuple(path): value for path, value in entry["attrs"]})


def _compiled(kernel: Any, found: Binary) -> Any:
    from triton.compiler import CompiledKernel

    group = {found.metadata.name: str(found.metadata), found.binary.name: str(found.binary)}
    return CompiledKernel(_source(kernel, found), group, found.hash)


def load(kernel: Any, key: str) -> Any:
    """The ``CompiledKernel`` the installed pack holds for launch key ``key``, else the kernel
    cache's, or None."""
    from tessera._core.launch import function_name

    found = _in_pack(function_name(kernel), key)
    if found is not None:
        log.trace(f"launch {found.function}: precompiled {found.binary.name} from the installed pack")
        return _compiled(kernel, found)
    return _cached(kernel, key)


def write_binary(compiled: Any, function: str, launch_key: str, folder: Path, stem: str) -> list[str]:
    """Write a compiled kernel as packs and the kernel cache hold it: the binary, Triton's metadata
    and the sidecar (the launch key, and Triton's specialization from ``compiled.src`` to rebuild
    its source), each all at once (``write_atomically``), the sidecar last. Returns the names."""
    source = compiled.src
    suffix = "cubin" if compiled.metadata.target.backend == "cuda" else "hsaco"
    files = {f"{stem}.{suffix}": compiled.asm[suffix],
             f"{stem}.json": json.dumps(compiled.metadata._asdict(), default=vars, sort_keys=True).encode()}
    files[f"{stem}{SIDECAR}"] = json.dumps({
        "function": function, "binary": f"{stem}.{suffix}", "metadata": f"{stem}.json",
        "hash": compiled.hash, "signature": source.signature,
        "constants": [[list(path), value] for path, value in source.constants.items()],
        "attrs": [[list(path), value] for path, value in source.attrs.items()],
        "launch_key": launch_key}).encode()
    for name, data in files.items():
        write_atomically(folder / name, data)
    return list(files)


CACHE_ENV = "TESSERA_KERNEL_CACHE"
_caching: ContextVar[bool] = ContextVar("tessera_kernel_cache", default=True)
_cache_failed: list[str] = []  # the first failure to write the cache, warned once a process


@contextlib.contextmanager
def not_cached() -> Iterator[None]:
    """JIT compiles in this block are not kept in the kernel cache (the tuner's candidates)."""
    token = _caching.set(False)
    try:
        yield
    finally:
        _caching.reset(token)


CACHE_DEFAULT = "1"  # its GPU test passed (benchmarks/results/gpu-session-h100-bf37654/)


def _cache_on() -> bool:
    return _caching.get() and os.environ.get(CACHE_ENV, CACHE_DEFAULT) != "0"


def cache_folder(backend: str, arch: object) -> Path:
    """The kernel cache's folder for a target, this Triton and this Tessera source."""
    import triton

    return cache_root() / f"{backend}-{arch}-triton{triton.__version__}-{source_fingerprint()[:16]}"


def stem(function: str, launch_key: str) -> str:
    """The file name (without suffix) of a launch's binary in the kernel cache and in packs."""
    return hashlib.sha256(f"{function}\0{launch_key}".encode()).hexdigest()[:32]


def remember(kernel: Any, launch_key: str, compiled: Any) -> None:
    """Keep a binary Triton's JIT just compiled (or found in its cache) in the kernel cache. A
    failure (a full disk, a constant JSON cannot hold) is warned once and never fails the call."""
    if not _cache_on():
        return
    from tessera._core.launch import function_name

    try:
        target = compiled.metadata.target
        folder = cache_folder(target.backend, target.arch)
        function = function_name(kernel)
        name = stem(function, launch_key)
        if (folder / f"{name}{SIDECAR}").is_file():
            return
        folder.mkdir(parents=True, exist_ok=True)
        write_binary(compiled, function, launch_key, folder, name)
    except Exception as exc:  # noqa: BLE001 - the cache is an optimization: the call has its binary
        if not _cache_failed:
            _cache_failed.append(str(exc))
            warnings.warn(f"the kernel cache could not keep a binary ({type(exc).__name__}: {exc}); "
                          f"later processes will compile it again ({CACHE_ENV}=0 stops trying)",
                          stacklevel=3)


def _cached(kernel: Any, launch_key: str, target: Any = None) -> Any:
    """The kernel cache's binary for this launch on ``target`` (default: the current device's),
    or None."""
    if not _cache_on():
        return None
    from tessera._core.launch import function_name

    if target is None:
        from triton.runtime.driver import driver

        target = driver.active.get_current_target()
    function = function_name(kernel)
    found = _named(cache_folder(target.backend, target.arch), function, launch_key)
    if found is None:
        return None  # not cached (or not readable: compiled again)
    log.trace(f"launch {function}: {found.binary.name} from the kernel cache")
    return _compiled(kernel, found)


def prepare() -> tuple[int, list[str]]:
    """Load every binary of the active pack on the current GPU once, so the launcher stubs Triton
    builds per signature (a C compile, cached in Triton's cache directory) exist before the first
    call. Run after an install on the machine that will use the pack. Returns (loaded, problems)."""
    import importlib

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
                _compiled(kernel, found).run  # noqa: B018 - loads it and builds the launcher stub
                loaded += 1
            except Exception as exc:  # noqa: BLE001 - report every binary that cannot be loaded here
                problems.append(f"{found.binary.name}: {type(exc).__name__}: {exc}")
    return loaded, problems
