"""Packs: tuned logic (and precompiled kernels) for one architecture, built offline, installed safely.

A pack is a ``.tar.gz`` holding ``manifest.json`` (format, name, version, arch, backend, the Triton
and Tessera versions it was built with, creation time, origin of its logic, the sha256 of every
other member, the precompiled kernels and the build's support table), ``logic/<arch>/*.yaml`` and
``kernels/*`` (cubin/hsaco with the metadata Triton wrote).

Install root (``TESSERA_HOME`` or the platform's user data directory)::

    <root>/.lock                 filelock: one install/rollback/remove at a time
    <root>/tmp/<id>/             staging; anything here after a crash is removed by the next install
    <root>/packs/<name>-<ver>-<sha8>-<time>/   one directory per installed pack
    <root>/current -> packs/…    the active pack (a symlink replaced atomically)
    <root>/previous -> packs/…   the backup that ``rollback`` switches back to
    (an install removes every other directory under packs/ once it has switched)

Nothing is written outside the root; archive members with absolute paths, ``..``, links or device
files are refused before anything is written; every member's checksum is verified first.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from tessera._core.device import ARCH_NAME, INTERPRETER_ARCH, offline_device
from tessera._core.errors import InvalidArgumentError, LogicFileError, PackError
from tessera.tuning import binaries, logic
from tessera.tuning.paths import SHIPPED_LOGIC, install_root

PACK_FORMAT = 1
MANIFEST = "manifest.json"
# what a pack may unpack to before it is read into memory: an sm_90 pack of every shipped kernel
# (208) holds 4258 members and 88 MB; a gzip bomb of zeros unpacks ~1000 times its size
MAX_PACK_BYTES = 4 << 30
MAX_PACK_MEMBERS = 200_000
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def kill_point(stage: str) -> None:
    """Reliability tests kill an install, or a compiler process, at a chosen stage
    (``TESSERA_TEST_KILL_AT=<stage>``)."""
    if os.environ.get("TESSERA_TEST_KILL_AT") == stage:
        os.kill(os.getpid(), signal.SIGKILL)


# ----------------------------------------------------------------------------------------- build

@dataclass
class BuildResult:
    path: Path
    manifest: dict[str, Any]


def _logic_documents(arch: str, logic_dir: Path | None) -> tuple[dict[str, bytes], str]:
    """Logic members for the pack and their origin. With ``logic_dir``: exactly its files. Without:
    every registered op's shipped logic for ``arch`` where the wheel has it, the heuristic's
    elsewhere (an arch tuned for one op still gets the others)."""
    if logic_dir is not None:
        folder = logic_dir / arch if (logic_dir / arch).is_dir() else logic_dir
        files = sorted(folder.glob("*.yaml")) if folder.is_dir() else []
        if not files:
            raise PackError(f"--logic {logic_dir}: no *.yaml logic files there or in {logic_dir / arch}")
    else:
        files = sorted((SHIPPED_LOGIC / arch).glob("*.yaml")) if (SHIPPED_LOGIC / arch).is_dir() else []
    members: dict[str, bytes] = {}
    origins = set()
    for path in files:
        parsed = logic.load_logic(path)
        if parsed.arch != arch:
            raise PackError(f"{path} is logic for {parsed.arch}, not {arch}")
        if path.name != f"{parsed.stem}.yaml":  # the loader finds a problem's logic by its file name only
            raise PackError(f"{path} holds logic for {parsed.stem}: name it {parsed.stem}.yaml (a pack's "
                            f"logic is looked up by file name)")
        members[f"logic/{arch}/{path.name}"] = path.read_bytes()
        origins.add(parsed.origin)
    if logic_dir is None:
        device = offline_device(arch)
        for (library, op), spec in sorted(logic.registered_ops().items()):
            for doc in spec.heuristic(device) if spec.heuristic else []:
                name = f"logic/{arch}/{logic.problem_stem(library, op, doc['problem']['dtype'])}.yaml"
                if name not in members:
                    members[name] = yaml.safe_dump(doc, sort_keys=False).encode()
                    origins.add("heuristic")
    return members, origins.pop() if len(origins) == 1 else "mixed"


def default_workers() -> int:
    """Compiler processes a pack build runs at once by default: one a CPU, at most 8 (each holds
    torch and Triton, ~0.5 GB)."""
    return max(1, min(os.cpu_count() or 1, 8))


def _result_lines(folder: Path) -> list[str]:
    """The result lines a compiler process has printed so far (one JSON object a job)."""
    return [line for line in (folder / "stdout.txt").read_text().splitlines() if line.startswith("{")]


def _follow(children: list[tuple[Path, subprocess.Popen]], total: int, title: str, deadline: float,
            progress: bool) -> None:
    """Wait for the compiler processes (until ``deadline``), counting the jobs they have answered
    on a progress bar (stderr) when ``progress`` (their output is read only then)."""
    from tqdm import tqdm

    with tqdm(total=total, desc=title, unit="solution", disable=not progress, file=sys.stderr) as bar:
        while True:
            running = any(child.poll() is None for _, child in children)
            if progress:
                bar.update(sum(len(_result_lines(folder)) for folder, _ in children) - bar.n)
            if not running or time.monotonic() > deadline:
                return
            time.sleep(0.2)


def _run_compilers(arch: str, jobs: list[dict], out: Path, workers: int,
                   progress: bool = False) -> dict[int, tuple[dict, Path | None]]:
    """Compile ``jobs`` for ``arch`` in ``workers`` child processes at once (jobs dealt round-robin,
    each child writing into a folder of its own): job index → (its result line, that folder). A
    job its process did not answer (it crashed or ran past the hour) is a failed result saying so;
    the build stops only where no process answered anything (they could not start)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]),
                                                      env.get("PYTHONPATH")]))
    children = []
    for shard in range(min(workers, len(jobs))):
        folder = out / f"shard-{shard}"
        folder.mkdir()
        request = {"arch": arch, "out": str(folder), "warp_size": offline_device(arch).warp_size,
                   "jobs": jobs[shard::workers]}
        (folder / "request.json").write_text(json.dumps(request))
        # files, not pipes, for the child's input and output: nothing blocks while its siblings run
        with open(folder / "request.json") as stdin, open(folder / "stdout.txt", "w") as stdout, \
                open(folder / "stderr.txt", "w") as stderr:
            children.append((folder, subprocess.Popen([sys.executable, "-m", "tessera.tuning.precompile"],
                                                      stdin=stdin, stdout=stdout, stderr=stderr, env=env)))
    results: dict[int, tuple[dict, Path | None]] = {}
    try:
        _follow(children, len(jobs), f"precompile {arch}", time.monotonic() + 3600, progress)
        endings = []
        for shard, (folder, child) in enumerate(children):
            if child.poll() is None:  # past the deadline
                child.kill()
                child.wait()
            answered = [json.loads(line) for line in _result_lines(folder)]
            results.update((line["job"], (line, folder)) for line in answered)
            last = ((folder / "stderr.txt").read_text().strip().splitlines() or ["no message"])[-1]
            endings.append((child.returncode, bool(answered), last))
            stopped = {"status": "failed", "reason": f"the compiler process stopped before it (exit code "
                                                     f"{child.returncode}: {last[-300:]})"}
            for job in jobs[shard::workers]:
                results.setdefault(job["index"], (stopped, None))
        if all(code != 0 and not answered for code, answered, _ in endings):
            raise PackError(f"precompiling for {arch} failed to start: {endings[0][2][-500:]}")
    finally:  # an error or an interrupt leaves no compiler writing into a folder about to go
        for _, child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return results


def _precompile(arch: str, logic_members: dict[str, bytes], workers: int | None = None,
                progress: bool = False) -> tuple[dict[str, bytes], list[dict]]:
    """Compile every solution of the pack's logic for ``arch``, in ``workers`` child processes
    (default :func:`default_workers`). The pack is the same for any number of them: a launch that
    several jobs make (tf32's K-major copies) is kept from the first job in order that compiled
    it, as one process compiling the jobs in order would have kept it."""
    jobs = []
    for name, data in sorted(logic_members.items()):
        doc = yaml.safe_load(data)
        for solution in doc["solutions"]:
            config = {k: v for k, v in solution.items() if k not in ("id", "kernel")}
            jobs.append({"index": len(jobs), "library": doc["library"], "op": doc["op"],
                         "kernel": solution["kernel"], "dtype": doc["problem"]["dtype"], "config": config,
                         "logic": name, "solution": solution["id"]})
    members: dict[str, bytes] = {}
    support = []
    kept: set[tuple[str, str]] = set()  # (function, launch key) of the binaries packed so far
    with tempfile.TemporaryDirectory() as out:
        results = (_run_compilers(arch, jobs, Path(out), workers or default_workers(), progress)
                   if jobs else {})
        for job in jobs:
            row = {k: job[k] for k in ("kernel", "dtype", "logic", "solution")}
            result, folder = results[job["index"]]
            row["status"] = result["status"]
            if result["status"] != "ok":
                support.append(row | {"reason": result["reason"]})
                continue
            files = []
            for binary, metadata, sidecar in zip(*[iter(result["files"])] * 3, strict=True):
                entry = json.loads((folder / sidecar).read_text())
                key = (entry["function"], entry["launch_key"])
                if key in kept:
                    continue
                kept.add(key)
                for name in (binary, metadata, sidecar):
                    members[f"kernels/{name}"] = (folder / name).read_bytes()
                    files.append(f"kernels/{name}")
            support.append(row | {"files": files})
    sidecars = {Path(name).name: data for name, data in members.items() if name.endswith(binaries.SIDECAR)}
    if sidecars:
        members[f"kernels/{binaries.INDEX}"] = binaries.index_document(sidecars)
        members[f"kernels/{binaries.SOURCE_MEMBER}"] = binaries.source_fingerprint().encode()
    return members, support


def build_pack(arch: str, out: Path, *, logic_dir: Path | None = None, precompile: bool = False,
               name: str | None = None, version: str = "1", workers: int | None = None,
               progress: bool = False) -> BuildResult:
    """Build a pack for ``arch`` (no GPU of that arch needed) and write it atomically to ``out``;
    ``workers``: compiler processes for ``precompile`` (default :func:`default_workers`);
    ``progress``: a progress bar of the compiled solutions on stderr."""
    import triton

    if workers is not None and workers < 1:
        raise InvalidArgumentError(f"a pack build runs at least one compiler process (asked for {workers}); "
                                   f"pass --jobs 1 or more, or leave it out for one a CPU")
    if not isinstance(arch, str) or not ARCH_NAME.fullmatch(arch):
        raise PackError(f"--arch {arch!r} is not an architecture name: expected sm_<NN> (NVIDIA, e.g. "
                        f"sm_90), gfx<ID> (AMD, e.g. gfx1103, gfx90a) or {INTERPRETER_ARCH!r}")
    out = Path(out)
    if out.is_dir() or not out.name:
        raise PackError(f"-o {out}: is a directory; give the pack's file path "
                        f"(e.g. {out / f'tessera-{arch}.tar.gz'})")
    logic_members, origin = _logic_documents(arch, logic_dir)
    kernel_members, support = (_precompile(arch, logic_members, workers, progress) if precompile
                               else ({}, []))
    members = {**logic_members, **kernel_members}
    manifest = {
        "format": PACK_FORMAT, "name": name or f"tessera-{arch}", "version": str(version),
        "arch": arch, "backend": offline_device(arch).backend,
        "runtime": {"triton": triton.__version__, "tessera": _version(),
                    binaries.SOURCE_FIELD: binaries.source_fingerprint()},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "logic_origin": origin,
        "files": {path: _sha256(data) for path, data in sorted(members.items())},
        "support": support,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{uuid.uuid4().hex}.tmp")
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            for path, data in [(MANIFEST, json.dumps(manifest, indent=1).encode()), *sorted(members.items())]:
                info = tarfile.TarInfo(path)
                info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return BuildResult(out, manifest)


# ----------------------------------------------------------------------------------------- check

def _safe_member_name(name: str) -> bool:
    path = PurePosixPath(name)
    return bool(name) and not path.is_absolute() and ".." not in path.parts and "\\" not in name


def check_pack(path: Path) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Read a pack fully into memory and verify it; raise :class:`PackError` saying what is wrong."""
    path = Path(path)
    contents: dict[str, bytes] = {}
    unpacked = members = 0
    try:
        with tarfile.open(path, "r:gz") as tar:
            for member in tar:
                members, unpacked = members + 1, unpacked + max(member.size, 0)
                if members > MAX_PACK_MEMBERS or unpacked > MAX_PACK_BYTES:
                    raise PackError(f"{path}: unpacks to over {MAX_PACK_MEMBERS} members or "
                                    f"{MAX_PACK_BYTES >> 20} MiB (a pack of every sm_90 kernel holds ~4000 "
                                    f"and ~90 MB); refused as damaged or not a pack")
                if not _safe_member_name(member.name):
                    raise PackError(f"{path}: member {member.name!r} has an absolute or '..' path; refused")
                if member.issym() or member.islnk():
                    raise PackError(f"{path}: member {member.name!r} is a link; refused")
                if member.isdir():
                    continue
                if not member.isfile():
                    raise PackError(f"{path}: member {member.name!r} is a device or special file; refused")
                if member.name in contents:
                    raise PackError(f"{path}: member {member.name!r} appears twice; refused")
                extracted = tar.extractfile(member)
                contents[member.name] = extracted.read() if extracted else b""
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise PackError(f"{path}: not a readable pack (truncated or not a .tar.gz: {exc})") from exc
    if MANIFEST not in contents:
        raise PackError(f"{path}: no {MANIFEST}; not a Tessera pack")
    try:
        manifest = json.loads(contents.pop(MANIFEST))
    except (ValueError, RecursionError) as exc:  # RecursionError: arrays nested too deep to decode
        raise PackError(f"{path}: {MANIFEST} is not valid JSON ({exc})") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != PACK_FORMAT:
        raise PackError(f"{path}: pack format {manifest.get('format') if isinstance(manifest, dict) else '?'}"
                        f" is not supported; this Tessera reads format {PACK_FORMAT}")
    for key in ("name", "version", "arch", "runtime", "files"):
        if key not in manifest:
            raise PackError(f"{path}: {MANIFEST} lacks '{key}'")
    for key in ("name", "version", "arch"):  # they name directories: nothing may escape the root
        if not isinstance(manifest[key], str) or not _SAFE_NAME.fullmatch(manifest[key]):
            raise PackError(f"{path}: {MANIFEST} '{key}' {manifest[key]!r} is not a plain name "
                            "(letters, digits, '.', '_', '-'; at most 64); refused")
    if not isinstance(manifest["files"], dict) or not isinstance(manifest["runtime"], dict):
        raise PackError(f"{path}: {MANIFEST} 'files' and 'runtime' must be mappings")
    listed = manifest["files"]
    unlisted = sorted(set(contents) - set(listed))
    if unlisted:
        raise PackError(f"{path}: member {unlisted[0]!r} is not listed in the manifest; refused")
    for name, digest in sorted(listed.items()):
        if name not in contents:
            raise PackError(f"{path}: {name} is listed in the manifest but missing")
        if _sha256(contents[name]) != digest:
            raise PackError(f"{path}: checksum mismatch for {name} (the pack is corrupt or was altered)")
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in contents.items():
            if name.startswith("logic/") and name.endswith(".yaml"):
                target = Path(tmp) / Path(name).name
                target.write_bytes(data)
                try:
                    logic.load_logic(target)
                except LogicFileError as exc:
                    raise PackError(f"{path}: {name}: {str(exc).split(': ', 1)[-1]}") from exc
    return manifest, contents


# --------------------------------------------------------------------------------------- install

@dataclass(frozen=True)
class Installed:
    directory: Path
    manifest: dict[str, Any]
    current: bool
    previous: bool


def _lock(root: Path) -> Any:
    from filelock import FileLock

    root.mkdir(parents=True, exist_ok=True)
    return FileLock(str(root / ".lock"), timeout=600)


def _write_durably(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync_dir(path: Path) -> None:
    """Make a directory's entries (new files, renames) durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _point(link: Path, target: Path) -> None:
    """Make ``link`` point at ``target`` atomically (a new symlink renamed over the old one)."""
    tmp = link.with_name(f".{link.name}.{uuid.uuid4().hex}")
    os.symlink(os.path.relpath(target, link.parent), tmp)
    os.replace(tmp, link)
    _fsync_dir(link.parent)


def _prune(root: Path) -> None:
    """Remove installed packs that are neither current nor previous (older backups, and directories
    left by an install killed before its switch)."""
    keep = {_target(root / "current"), _target(root / "previous")}
    for directory in (root / "packs").iterdir():
        if directory.resolve() not in keep:
            shutil.rmtree(directory, ignore_errors=True)


def _target(link: Path) -> Path | None:
    if not link.is_symlink():
        return None
    target = (link.parent / os.readlink(link)).resolve()
    return target if target.is_dir() else None


def _clean_staging(root: Path) -> None:
    shutil.rmtree(root / "tmp", ignore_errors=True)
    for stray in root.glob(".current.*"):
        stray.unlink(missing_ok=True)
    for stray in root.glob(".previous.*"):
        stray.unlink(missing_ok=True)


def _version() -> str:
    from tessera import __version__

    return __version__


def install_pack(path: Path, *, root: Path | None = None, arch: str | None = None,
                 triton_version: str | None = None) -> Installed:
    """Verify ``path``, refuse it for another arch or Triton version, unpack it into a new
    directory and switch ``current`` to it atomically, keeping the old one as ``previous``."""
    import triton

    from tessera._core.device import device_info

    manifest, contents = check_pack(path)
    here_arch = arch or device_info().arch
    here_triton = triton_version or triton.__version__
    if manifest["arch"] != here_arch:
        raise PackError(f"pack {manifest['name']} {manifest['version']} is for {manifest['arch']}; this "
                        f"machine is {here_arch}: build one with `tessera pack build --arch {here_arch}`")
    built_with = manifest["runtime"].get("triton")
    if built_with != here_triton:
        raise PackError(f"pack {manifest['name']} {manifest['version']} was built with triton {built_with}; "
                        f"installed triton is {here_triton}: its kernels would not load. Rebuild it "
                        f"with triton {here_triton}, or install triton=={built_with}")
    source = binaries.built_from(manifest)
    if any(name.startswith("kernels/") for name in contents) and source != binaries.source_fingerprint():
        raise PackError(f"pack {manifest['name']} {manifest['version']} holds kernels compiled from another "
                        f"Tessera (tessera {manifest['runtime'].get('tessera', '?')}, source "
                        f"{(source or 'not recorded')[:12]}); this is tessera {_version()} (source "
                        f"{binaries.source_fingerprint()[:12]}), whose kernels may differ: rebuild the pack "
                        f"with this Tessera (`tessera pack build --precompile`)")
    root = Path(root) if root is not None else install_root()
    with _lock(root):
        _clean_staging(root)
        staging = root / "tmp" / uuid.uuid4().hex
        for name, data in [*contents.items(), (MANIFEST, json.dumps(manifest, indent=1).encode())]:
            target = staging / name
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_durably(target, data)
        for folder in {(staging / name).parent for name in contents} | {staging}:
            _fsync_dir(folder)
        kill_point("extracted")
        digest = _sha256(json.dumps(manifest, sort_keys=True).encode())[:8]
        final = root / "packs" / f"{manifest['name']}-{manifest['version']}-{digest}-{time.time_ns()}"
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, final)
        _fsync_dir(final.parent)
        kill_point("moved")
        previous = _target(root / "current")
        _point(root / "current", final)
        kill_point("switched")
        if previous is not None:
            _point(root / "previous", previous)
        _prune(root)
    logic.reload()
    return Installed(final, manifest, True, False)


def binaries_state(manifest: dict) -> str:
    """How many precompiled binaries a pack holds and whether this Tessera loads them (they load
    only under the source that compiled them, ``binaries.source_fingerprint``)."""
    count = sum(name.startswith("kernels/") and name.endswith((".cubin", ".hsaco"))
                for name in manifest.get("files", {}))
    if not count:
        return "logic only"
    usable = binaries.built_from(manifest) == binaries.source_fingerprint()
    return f"{count} binaries{'' if usable else ' (ignored: compiled from another Tessera source)'}"


def list_packs(root: Path | None = None) -> list[Installed]:
    root = Path(root) if root is not None else install_root()
    current, previous = _target(root / "current"), _target(root / "previous")
    found = []
    for directory in sorted((root / "packs").glob("*")) if (root / "packs").is_dir() else []:
        try:
            manifest = json.loads((directory / MANIFEST).read_text())
        except (OSError, ValueError, RecursionError):
            continue  # not a complete install (cannot happen through install_pack; be tolerant)
        found.append(Installed(directory, manifest, directory == current, directory == previous))
    return found


def rollback(root: Path | None = None) -> Installed:
    """Switch back to the previous install (and keep the one replaced as the new previous)."""
    root = Path(root) if root is not None else install_root()
    with _lock(root):
        current, previous = _target(root / "current"), _target(root / "previous")
        if previous is None:
            raise PackError(f"nothing to roll back to: no previous install under {root}")
        _point(root / "current", previous)
        if current is not None:
            _point(root / "previous", current)
    logic.reload()
    return next(p for p in list_packs(root) if p.current)


def remove(root: Path | None = None, *, directory: Path | None = None) -> Path:
    """Remove an installed pack (default: the current one; the previous one becomes current)."""
    root = Path(root) if root is not None else install_root()
    with _lock(root):
        current, previous = _target(root / "current"), _target(root / "previous")
        victim = Path(directory).resolve() if directory is not None else current
        if victim is None or victim.parent != (root / "packs").resolve():
            raise PackError(f"no such installed pack under {root / 'packs'}: {directory or 'current'}")
        if victim == current:
            if previous is not None:
                _point(root / "current", previous)
                (root / "previous").unlink()
            else:
                (root / "current").unlink()
        elif victim == previous:
            (root / "previous").unlink()
        shutil.rmtree(victim)
    logic.reload()
    return victim


def verify_installed_files(root: Path | None = None) -> Iterator[str]:
    """Re-check the active pack's files against its manifest; yields one line per problem."""
    root = Path(root) if root is not None else install_root()
    current = _target(root / "current")
    if current is None:
        yield f"no pack is installed under {root}"
        return
    manifest = json.loads((current / MANIFEST).read_text())
    for name, digest in sorted(manifest["files"].items()):
        file = current / name
        if not file.is_file():
            yield f"{name}: missing"
        elif _sha256(file.read_bytes()) != digest:
            yield f"{name}: checksum mismatch"
