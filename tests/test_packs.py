"""Packs: build offline, verify, install atomically with a backup, refuse bad packs, survive kills."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import torch
import triton
import yaml

from child import compiler_env
from reference import assert_gemm_close
from tessera import InvalidArgumentError, PackError
from tessera.blas import explain, gemm
from tessera.cli import main
from tessera.tuning import packs
from tessera.tuning.paths import SHIPPED_LOGIC

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def sm90_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return packs.build_pack("sm_90", tmp_path_factory.mktemp("p") / "sm90.tar.gz").path


def install(path: Path, root: Path, arch: str = "sm_90") -> packs.Installed:
    return packs.install_pack(path, root=root, arch=arch, triton_version=triton.__version__)


def state(root: Path) -> list[tuple[str, bool, bool]]:
    return [(p.directory.name, p.current, p.previous) for p in packs.list_packs(root)]


def test_build_manifest_and_heuristic_logic(sm90_pack: Path) -> None:
    manifest, contents = packs.check_pack(sm90_pack)
    assert manifest["arch"] == "sm_90" and manifest["backend"] == "cuda"
    # the wheel ships tuned sm_90 logic for some rand draws; every other op gets the heuristic's
    assert manifest["runtime"]["triton"] == triton.__version__ and manifest["logic_origin"] == "mixed"
    assert set(manifest["files"]) == set(contents)
    assert "logic/sm_90/blas.gemm.bf16.yaml" in contents and "logic/sm_90/blas.gemm.tf32.yaml" in contents
    shipped = contents["logic/sm_90/rand.philox_normal.bf16.yaml"]
    assert shipped == (SHIPPED_LOGIC / "sm_90" / "rand.philox_normal.bf16.yaml").read_bytes()
    assert b"origin: heuristic" in contents["logic/sm_90/rand.philox_normal.fp16.yaml"]


def test_install_switch_backup_rollback_remove(sm90_pack: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    first = install(sm90_pack, root)
    assert (root / "current").resolve() == first.directory
    assert (root / "current" / "logic" / "sm_90" / "blas.gemm.fp16.yaml").is_file()
    second = install(sm90_pack, root)
    assert state(root) == sorted([(first.directory.name, False, True), (second.directory.name, True, False)])
    assert packs.rollback(root).directory == first.directory
    assert (root / "previous").resolve() == second.directory
    assert list(packs.verify_installed_files(root)) == []
    third = install(sm90_pack, root)  # keeps the one it replaces as previous, prunes the older
    assert state(root) == sorted([(first.directory.name, False, True), (third.directory.name, True, False)])
    assert not second.directory.exists()
    packs.remove(root)  # removes the current (third); the previous (first) takes over
    assert state(root) == [(first.directory.name, True, False)]
    with pytest.raises(PackError, match="nothing to roll back to"):
        packs.rollback(root)
    packs.remove(root)
    assert state(root) == [] and not (root / "current").exists()


def _rewrite(source: Path, dest: Path, edit) -> Path:
    """Copy a pack member by member, letting ``edit(name, data, tarinfo)`` change or add members."""
    with tarfile.open(source, "r:gz") as tar:
        members = [(m, tar.extractfile(m).read()) for m in tar if m.isfile()]
    with tarfile.open(dest, "w:gz") as out:
        for info, data in members:
            data = edit(info.name, data, out)
            if data is not None:
                info.size = len(data)
                out.addfile(info, io.BytesIO(data))
    return dest


def _special(kind: bytes, name: str, linkname: str = ""):
    def edit(member: str, data: bytes, out: tarfile.TarFile) -> bytes:
        if member == "manifest.json":
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, linkname
            out.addfile(info)
        return data
    return edit


def _alter(member_name: str):
    def edit(member: str, data: bytes, out: tarfile.TarFile) -> bytes:
        return data.replace(b"block_m: 128", b"block_m: 64") if member == member_name else data
    return edit


def _add_regular(name: str):
    def edit(member: str, data: bytes, out: tarfile.TarFile) -> bytes:
        if member == "manifest.json":
            info = tarfile.TarInfo(name)
            info.size = 3
            out.addfile(info, io.BytesIO(b"x=1"))
        return data
    return edit


def _alter_manifest(replacement: bytes):
    def edit(member: str, data: bytes, out: tarfile.TarFile) -> bytes:
        return replacement if member == "manifest.json" else data
    return edit


def _manifest_field(key: str, value: object):
    def edit(member: str, data: bytes, out: tarfile.TarFile) -> bytes:
        if member != "manifest.json":
            return data
        manifest = json.loads(data)
        manifest[key] = value
        return json.dumps(manifest).encode()
    return edit


def _replace(member_name: str, replacement: bytes):
    """``member_name`` replaced, its checksum in the manifest too: a pack built so, not corrupted."""
    def edit(member: str, data: bytes, out: tarfile.TarFile) -> bytes:
        if member == member_name:
            return replacement
        if member != "manifest.json":
            return data
        manifest = json.loads(data)
        manifest["files"][member_name] = hashlib.sha256(replacement).hexdigest()
        return json.dumps(manifest).encode()
    return edit


DEEP = b"[" * 200_000 + b"]" * 200_000  # parsers that recurse per level crashed on this


BAD_PACKS = {
    "member altered": (_alter("logic/sm_90/blas.gemm.bf16.yaml"),
                       "checksum mismatch for logic/sm_90/blas.gemm.bf16.yaml"),
    "dot-dot member": (_add_regular("../escape.txt"), "absolute or '..' path"),
    "absolute member": (_add_regular("/tmp/escape.txt"), "absolute or '..' path"),
    "symlink member": (_special(tarfile.SYMTYPE, "logic/evil", "/etc/passwd"), "is a link"),
    "hard link member": (_special(tarfile.LNKTYPE, "logic/evil2", "manifest.json"), "is a link"),
    "device member": (_special(tarfile.CHRTYPE, "logic/null"), "device or special file"),
    "unlisted member": (_add_regular("kernels/extra.bin"), "not listed in the manifest"),
    "name escaping the root": (_manifest_field("name", "../../escaped"),
                               "'name' '../../escaped' is not a plain"),
    "version with a slash": (_manifest_field("version", "1/2"), "'version' '1/2' is not a plain name"),
    "manifest nested too deep": (_alter_manifest(DEEP), "manifest.json is not valid JSON"),
    "logic nested too deep": (_replace("logic/sm_90/blas.gemm.bf16.yaml", b"schema: 1\nx: " + DEEP),
                              "blas.gemm.bf16.yaml: brackets nested 200000 deep"),
}


@pytest.mark.parametrize("case", list(BAD_PACKS))
def test_bad_packs_are_refused_and_state_unchanged(case: str, sm90_pack: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    install(sm90_pack, root)
    before = state(root)
    edit, message = BAD_PACKS[case]
    bad = _rewrite(sm90_pack, tmp_path / "bad.tar.gz", edit)
    with pytest.raises(PackError, match=message):
        install(bad, root)
    assert state(root) == before
    assert list(packs.verify_installed_files(root)) == []


@pytest.mark.parametrize("limit", ["MAX_PACK_BYTES", "MAX_PACK_MEMBERS"])
def test_a_pack_unpacking_past_the_limits_is_refused_before_it_is_read(
        limit: str, sm90_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A gzip bomb is refused by the sizes its tar headers declare, before its members are read
    into memory (each limit lowered here to 2, under this pack's members and bytes)."""
    root = tmp_path / "root"
    install(sm90_pack, root)
    before = state(root)
    monkeypatch.setattr(packs, limit, 2)
    with pytest.raises(PackError, match="unpacks to over"):
        install(sm90_pack, root)
    assert state(root) == before


def test_truncated_and_bit_flipped_packs(sm90_pack: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    data = sm90_pack.read_bytes()
    truncated = tmp_path / "t.tar.gz"
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(PackError, match="not a readable pack"):
        install(truncated, root)
    raw = bytearray(gzip.decompress(data))
    raw[raw.index(b"block_k")] ^= 0x20  # flip one bit inside a logic member, keep the archive valid
    flipped = tmp_path / "f.tar.gz"
    flipped.write_bytes(gzip.compress(bytes(raw)))
    with pytest.raises(PackError, match="checksum mismatch"):
        install(flipped, root)
    assert state(root) == []


def test_wrong_arch_and_wrong_triton_say_what_is_needed(sm90_pack: Path, tmp_path: Path) -> None:
    with pytest.raises(PackError, match=r"is for sm_90; this machine is gfx1103: build one with "
                                        r"`tessera pack build --arch gfx1103`"):
        packs.install_pack(sm90_pack, root=tmp_path, arch="gfx1103", triton_version=triton.__version__)
    wanted = rf"built with triton {re.escape(triton.__version__)}; installed triton is 3\.0\.0"
    with pytest.raises(PackError, match=wanted):
        packs.install_pack(sm90_pack, root=tmp_path, arch="sm_90", triton_version="3.0.0")


def _with_kernels(source: str | None):
    """A pack with one (fake) precompiled binary, listed in its manifest, built from ``source``."""
    index = json.dumps({"format": 1, "sidecars": {"b.launch.json": {
        "function": "m:kernel", "launch_key": "key", "binary": "b.cubin", "metadata": "b.json",
        "hash": "h"}}}).encode()

    def edit(member: str, data: bytes, out: tarfile.TarFile) -> bytes:
        if member != "manifest.json":
            return data
        info = tarfile.TarInfo("kernels/index.json")
        info.size = len(index)
        out.addfile(info, io.BytesIO(index))
        manifest = json.loads(data)
        manifest["files"]["kernels/index.json"] = hashlib.sha256(index).hexdigest()
        manifest["runtime"].pop("tessera_source", None)
        if source is not None:
            manifest["runtime"]["tessera_source"] = source
        return json.dumps(manifest).encode()
    return edit


def test_binaries_load_only_under_the_tessera_source_that_compiled_them(
        sm90_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A launch key names a kernel and its arguments, not its code: a pack compiled by another
    Tessera (or one that did not record its source) is refused when it holds binaries, and a pack
    installed before Tessera changed has its binaries ignored with a warning (calls compile)."""
    from tessera.tuning import binaries
    from tessera.tuning.paths import install_root

    here = binaries.source_fingerprint()
    assert re.fullmatch(r"[0-9a-f]{64}", here)
    assert packs.check_pack(sm90_pack)[0]["runtime"]["tessera_source"] == here
    root = install_root()
    for source in ("0" * 64, None):
        other = _rewrite(sm90_pack, tmp_path / "other.tar.gz", _with_kernels(source))
        with pytest.raises(PackError, match="holds kernels compiled from another Tessera"):
            install(other, root)
        assert state(root) == []
    install(_rewrite(sm90_pack, tmp_path / "same.tar.gz", _with_kernels(here)), root)
    assert set(binaries.installed()["m:kernel"]) == {"key"}
    monkeypatch.setattr(binaries, "source_fingerprint", lambda: "1" * 64)  # Tessera upgraded since
    binaries._active.cache_clear()
    with pytest.warns(UserWarning, match="ignoring the precompiled kernels of the installed pack"):
        assert binaries.installed() == {}
    install(sm90_pack, root)  # logic only: taken whatever built it
    binary = {"files": {"kernels/a.cubin": "0", "kernels/a.json": "0"}}
    assert packs.binaries_state({**binary, "runtime": {"tessera_source": "1" * 64}}) == "1 binaries"
    assert "ignored" in packs.binaries_state({**binary, "runtime": {"tessera_source": here}})  # patched above


def _fingerprint_by_reading(package: Path) -> str:
    """The source fingerprint's definition, computed here independently: every ``*.py`` file's
    relative path and bytes, in path order."""
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py"), key=lambda p: p.relative_to(package).as_posix()):
        if "__pycache__" not in path.parts:
            digest.update(path.relative_to(package).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def test_source_fingerprint_is_kept_by_file_metadata_and_follows_every_edit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fingerprint kept by the files' metadata (path, size, times, inode) is read back instead
    of the files; an edit that keeps the size and puts the modification time back is still seen
    (the change time moves); a memo is not written while files are younger than the clock can tell
    apart, a corrupt one is ignored, an unwritable folder only costs the reads."""
    from tessera.tuning import binaries

    package = tmp_path / "pkg"
    (package / "sub" / "__pycache__").mkdir(parents=True)
    (package / "a.py").write_text("x = 1\n")
    (package / "sub" / "b.py").write_text("y = 2\n")
    (package / "sub" / "notes.txt").write_text("not source")
    (package / "sub" / "__pycache__" / "c.py").write_text("ignored")
    memos = tmp_path / "memo"
    expected = _fingerprint_by_reading(package)
    assert binaries.fingerprint_of(package, memos) == expected
    assert not memos.exists()  # the files were written just now: nothing kept
    monkeypatch.setattr(binaries, "SETTLED_S", 0.0)
    assert binaries.fingerprint_of(package, memos) == expected
    (memo,) = memos.iterdir()
    assert memo.read_text() == expected
    memo.write_text("a" * 64)  # a memo is trusted: proves the files were not read again
    assert binaries.fingerprint_of(package, memos) == "a" * 64
    memo.write_text("not a digest")
    assert binaries.fingerprint_of(package, memos) == expected
    times = (package / "a.py").stat()
    (package / "a.py").write_text("x = 3\n")  # same size, modification time put back
    os.utime(package / "a.py", ns=(times.st_atime_ns, times.st_mtime_ns))
    changed = _fingerprint_by_reading(package)
    assert changed != expected
    assert binaries.fingerprint_of(package, memos) == changed
    (package / "sub" / "d.py").write_text("")  # a new file
    assert binaries.fingerprint_of(package, memos) == _fingerprint_by_reading(package)
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    assert binaries.fingerprint_of(package, blocked) == _fingerprint_by_reading(package)


_CACHE_CHILD = r"""
import json
import os
import sys

from triton.backends.compiler import GPUTarget

from tessera._core.launch import building_for, capture
from tessera.blas.kernels import level1
from tessera.tuning import binaries, precompile

target = GPUTarget("cuda", 90, 32)
with capture() as calls, building_for("cuda", "sm_90"):
    level1.representative_launch("level1_map", level1.VectorConfig(1024, 1, 4), "fp32", 132)
call = calls[0]
kernel, key = call.launcher.kernel, repr(call.key())
compiled = precompile.compile_for(call, target)  # what the JIT gives a launch on an H100/H200
seen = {}
os.environ.pop(binaries.CACHE_ENV, None)  # on by default
with binaries.not_cached():
    binaries.remember(kernel, key, compiled)
seen["not cached inside not_cached()"] = binaries._cached(kernel, key, target) is None
os.environ[binaries.CACHE_ENV] = "0"
binaries.remember(kernel, key, compiled)
os.environ.pop(binaries.CACHE_ENV)
seen["not cached with the variable 0"] = binaries._cached(kernel, key, target) is None
binaries.remember(kernel, key, compiled)
loaded = binaries._cached(kernel, key, target)
seen["loaded as compiled"] = (loaded is not None and loaded.hash == compiled.hash
                              and loaded.asm["cubin"] == compiled.asm["cubin"]
                              and loaded.src.signature == compiled.src.signature)
seen["another launch key"] = binaries._cached(kernel, key + " ", target) is None
seen["another arch"] = binaries._cached(kernel, key, GPUTarget("cuda", 100, 32)) is None
folder = binaries.cache_folder("cuda", 90)
seen["files"] = sorted(p.suffix for p in folder.iterdir())
binaries.source_fingerprint = lambda: "f" * 64  # another Tessera source: another folder
seen["another source"] = binaries._cached(kernel, key, target) is None
print("RESULT " + json.dumps(seen))
"""


def test_kernel_cache_keeps_jit_binaries_for_later_processes(tmp_path: Path) -> None:
    """A binary Triton compiled for a launch is kept (as packs keep theirs) and found again by its
    launch key on the same target, Triton and Tessera source — not inside ``not_cached()`` (the
    tuner), not with TESSERA_KERNEL_CACHE=0, and not for another key, arch or source. The launch
    itself is GPU-only (test_gpu_kernel_cache_first_call); here the binary is compiled offline."""
    env = {**compiler_env(), "TESSERA_HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", _CACHE_CHILD], capture_output=True, text=True, env=env,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(next(line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")))
    assert seen.pop("files") == [".cubin", ".json", ".json"]  # binary, metadata, sidecar: no temporaries
    assert all(seen.values()), seen


_INSTALL_CHILD = """
import sys
import triton
from tessera.tuning import packs
packs.install_pack(sys.argv[1], root=sys.argv[2], arch="sm_90", triton_version=triton.__version__)
"""


def _child_install(pack: Path, root: Path, kill_at: str | None = None) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    if kill_at:
        env["TESSERA_TEST_KILL_AT"] = kill_at
    return subprocess.Popen([sys.executable, "-c", _INSTALL_CHILD, str(pack), str(root)], env=env,
                            stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("stage", ["extracted", "moved", "switched"])
def test_install_killed_at_each_stage_leaves_a_consistent_state(stage: str, sm90_pack: Path,
                                                                 tmp_path: Path) -> None:
    root = tmp_path / "root"
    old = install(sm90_pack, root)
    child = _child_install(sm90_pack, root, kill_at=stage)
    assert child.wait(timeout=120) == -9, child.stderr.read()
    current = packs.list_packs(root)
    active = [p for p in current if p.current]
    assert len(active) == 1 and list(packs.verify_installed_files(root)) == []
    if stage != "switched":
        assert active[0].directory == old.directory  # the commit point is the switch
    new = install(sm90_pack, root)  # the next install succeeds and cleans up staging leftovers
    assert (root / "current").resolve() == new.directory and not any((root / "tmp").glob("*"))


def test_concurrent_installs_one_wins_cleanly(sm90_pack: Path, tmp_path: Path) -> None:
    root = tmp_path / "root"
    children = [_child_install(sm90_pack, root) for _ in range(2)]
    assert [c.wait(timeout=180) for c in children] == [0, 0]
    installed = packs.list_packs(root)
    assert len(installed) == 2
    assert sorted((p.current, p.previous) for p in installed) == [(False, True), (True, False)]
    assert list(packs.verify_installed_files(root)) == []


def test_build_from_logic_dir(tmp_path: Path) -> None:
    from test_logic import GOOD

    folder = tmp_path / "logic" / "interpreter"
    folder.mkdir(parents=True)
    (folder / "blas.gemm.fp32.yaml").write_text(yaml.safe_dump(GOOD))
    result = packs.build_pack("interpreter", tmp_path / "i.tar.gz", logic_dir=tmp_path / "logic")
    assert result.manifest["logic_origin"] == "tuned"
    with pytest.raises(PackError, match="is logic for interpreter, not sm_90"):
        packs.build_pack("sm_90", tmp_path / "x.tar.gz", logic_dir=folder)
    nt = {**GOOD, "problem": {"dtype": "fp32", "layout": "NT"}}
    (folder / "blas.gemm.fp32.yaml").write_text(yaml.safe_dump(nt))  # a layout's logic, misnamed
    misnamed = re.escape("holds logic for blas.gemm.fp32.NT: name it blas.gemm.fp32.NT.yaml")
    with pytest.raises(PackError, match=misnamed):
        packs.build_pack("interpreter", tmp_path / "n.tar.gz", logic_dir=folder)
    (folder / "blas.gemm.fp32.yaml").rename(folder / "blas.gemm.fp32.NT.yaml")
    built = packs.build_pack("interpreter", tmp_path / "n.tar.gz", logic_dir=folder)
    assert "logic/interpreter/blas.gemm.fp32.NT.yaml" in built.manifest["files"]


def test_precompile_reports_support(tmp_path: Path) -> None:
    folder = tmp_path / "logic"
    folder.mkdir()
    doc = {"schema": 1, "arch": "gfx1103", "library": "blas", "op": "gemm", "problem": {"dtype": "fp16"},
           "solutions": [{"id": 0, "kernel": "gemm_tile", "block_m": 32, "block_n": 32, "block_k": 32,
                          "num_warps": 4, "num_stages": 2},
                         {"id": 1, "kernel": "gemm_tma", "block_m": 64, "block_n": 64, "block_k": 32},
                         {"id": 2, "kernel": "gemm_splitk", "block_m": 16, "block_n": 64, "block_k": 64,
                          "split_k": 4}],
           "table": [{"m": 64, "n": 64, "k": 64, "batch": 1, "solution": 0},
                     {"m": 4096, "n": 4096, "k": 4096, "batch": 1, "solution": 1},
                     {"m": 16, "n": 4096, "k": 4096, "batch": 1, "solution": 2}]}
    (folder / "blas.gemm.fp16.yaml").write_text(yaml.safe_dump(doc))
    result = packs.build_pack("gfx1103", tmp_path / "g.tar.gz", logic_dir=folder, precompile=True)
    support = {row["kernel"]: row for row in result.manifest["support"]}
    tile = support["gemm_tile"]
    suffixes = [f.rsplit(".", 1)[-1] for f in tile["files"]]
    # M aligned, odd, 1, each with B row- and column-major; with C; alpha ≠ 1; N and K not
    # multiples of 16; N alone not
    assert tile["status"] == "ok" and suffixes == ["hsaco", "json", "json"] * 10
    assert support["gemm_tma"]["status"] == "failed" and "sm_90" in support["gemm_tma"]["reason"]
    splitk = support["gemm_splitk"]
    # the partial products for 3 Ms and 2 layouts of B, the reduction for 3 Ms (alike for both)
    assert splitk["status"] == "ok" and len(splitk["files"]) == 27, splitk
    _, contents = packs.check_pack(result.path)
    assert len(contents[tile["files"][0]]) > 1000
    sidecar = json.loads(contents[tile["files"][2]])
    assert sidecar["function"] == "tessera.blas.kernels.gemm_tile:_gemm_tile_kernel"
    assert sidecar["binary"] == Path(tile["files"][0]).name and "torch.float16" in sidecar["launch_key"]
    assert sidecar["signature"]["a_ptr"] == "*fp16"
    # the index the runtime reads instead of every sidecar finds exactly what the sidecars say
    from tessera.tuning import binaries, logic
    from tessera.tuning.paths import install_root

    kernels = tmp_path / "kernels"
    kernels.mkdir()
    for name, data in contents.items():
        if name.startswith("kernels/"):
            (kernels / Path(name).name).write_bytes(data)
    assert "kernels/index.json" in contents and "kernels/index.json" in result.manifest["files"]
    from_index = binaries._index(kernels, -1)
    (kernels / "index.json").unlink()
    from_sidecars = binaries._index(kernels, -2)
    assert from_index == from_sidecars and sum(map(len, from_index.values())) == 10 + 27 // 3
    # installed, each binary is found by its launch's name alone (one file test, no index read)
    assert contents["kernels/source"].decode() == binaries.source_fingerprint()
    install(result.path, install_root(), arch="gfx1103")
    binaries._active.cache_clear()
    assert binaries._active(install_root() / "current", logic.generation())[1]  # named by launch
    installed = binaries.installed()
    for function, by_key in installed.items():
        for key, entry in by_key.items():
            found = binaries._in_pack(function, key)
            assert found is not None and found.sidecar_name == f"{binaries.stem(function, key)}.launch.json"
            assert (found.binary_name, found.hash) == (entry.binary_name, entry.hash)
            assert binaries._in_pack(function, key + " ") is None
    assert sum(map(len, installed.values())) == 10 + 27 // 3


@pytest.mark.parametrize("index", [b'{"sidecars": []}', b"[]", b"{}", b'{"sidecars": {"a": 1}}', DEEP, b"{"],
                         ids=["sidecars a list", "a list", "no sidecars", "a number", "nested", "cut"])
def test_an_unreadable_kernel_index_is_ignored_with_a_warning(index: bytes, tmp_path: Path) -> None:
    """An older pack's kernels/index.json that is no index: its kernels are ignored (calls compile),
    the process goes on."""
    from tessera.tuning import binaries

    kernels = tmp_path / "kernels"
    kernels.mkdir()
    (kernels / "index.json").write_bytes(index)
    with pytest.warns(UserWarning, match="ignoring"):
        assert binaries._index(kernels, -3) == {}


def test_precompile_in_several_processes_builds_the_same_pack(tmp_path: Path) -> None:
    """The shipped symv logic's two solutions (8 and 16 tiles a program) launch the same walk
    kernel: one process compiles it for the first only; dealt to two processes, the second
    solution's process compiles it again and the build keeps the first's. Either way the pack
    holds the same members, byte for byte, the same support table, and one binary a launch."""
    folder = tmp_path / "logic"
    folder.mkdir()
    doc = yaml.safe_load((SHIPPED_LOGIC / "sm_90" / "blas.symv.bf16.yaml").read_text())
    assert len(doc["solutions"]) == 2
    (folder / "blas.symv.bf16.yaml").write_text(yaml.safe_dump({**doc, "arch": "gfx1103"}))
    built = {}
    for workers in (1, 2):
        result = packs.build_pack("gfx1103", tmp_path / f"{workers}.tar.gz", logic_dir=folder,
                                  precompile=True, workers=workers)
        _, contents = packs.check_pack(result.path)
        members = {k: v for k, v in contents.items() if k != "manifest.json"}
        built[workers] = (result.manifest["support"], members)
    assert built[1] == built[2]
    support, contents = built[1]
    assert [row["status"] for row in support] == ["ok", "ok"]
    first, second = ([json.loads(contents[f])["function"].rsplit(":", 1)[1] for f in row["files"]
                      if f.endswith(".launch.json")] for row in support)
    # the second solution's first launch (the walk: tiles a program is an argument) is the first's
    assert first.count("_symv_kernel") == 1 and "_symv_kernel" not in second
    keys = [(entry["function"], entry["launch_key"]) for name, data in contents.items()
            if name.endswith(".launch.json") for entry in [json.loads(data)]]
    assert len(keys) == len(set(keys)) == sum(len(row["files"]) for row in support) // 3
    with pytest.raises(InvalidArgumentError, match="at least one compiler process"):
        packs.build_pack("gfx1103", tmp_path / "0.tar.gz", logic_dir=folder, precompile=True, workers=0)
    assert main(["pack", "build", "--arch", "gfx1103", "--logic", str(folder), "--precompile", "-j", "0",
                 "-o", str(tmp_path / "0.tar.gz")]) == 2
    assert not (tmp_path / "0.tar.gz").exists()


def test_a_crashed_compiler_process_fails_only_its_own_solutions(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiler process killed before a job (a test hook: ``TESSERA_TEST_KILL_AT=precompile-N``)
    fails that job and the rest of its share with the reason; the other processes' solutions are
    packed. Only when no process answered anything does the build stop."""
    folder = tmp_path / "logic"
    folder.mkdir()
    symv = yaml.safe_load((SHIPPED_LOGIC / "sm_90" / "blas.symv.bf16.yaml").read_text())
    (folder / "blas.symv.bf16.yaml").write_text(yaml.safe_dump({**symv, "arch": "gfx1103"}))
    tile = {"schema": 1, "arch": "gfx1103", "library": "blas", "op": "gemm", "problem": {"dtype": "fp16"},
            "solutions": [{"id": 0, "kernel": "gemm_tile", "block_m": 32, "block_n": 32, "block_k": 32,
                           "num_warps": 4, "num_stages": 2}],
            "table": [{"m": 64, "n": 64, "k": 64, "batch": 1, "solution": 0}]}
    (folder / "blas.gemm.fp16.yaml").write_text(yaml.safe_dump(tile))  # job 0; symv's are 1 and 2

    def statuses(kill_at: str, workers: int) -> list[tuple[str, str]]:
        monkeypatch.setenv("TESSERA_TEST_KILL_AT", kill_at)
        result = packs.build_pack("gfx1103", tmp_path / f"{kill_at}-{workers}.tar.gz", logic_dir=folder,
                                  precompile=True, workers=workers)
        packs.check_pack(result.path)
        return [(row["status"], row.get("reason", "")) for row in result.manifest["support"]]

    # two processes: [0, 2] and [1]; the second dies at once
    (first, second, third) = statuses("precompile-1", 2)
    assert first[0] == third[0] == "ok"
    assert second[0] == "failed" and "stopped before it (exit code -9" in second[1]
    # one process dies after answering job 0: jobs 1 and 2 fail
    assert [status for status, _ in statuses("precompile-1", 1)] == ["ok", "failed", "failed"]
    with pytest.raises(PackError, match="failed to start"):
        statuses("precompile-0", 1)


# Run in a child without the interpreter: a launch's Launcher key and the specialization Triton's
# own binder derives for sm_90, as JSON on the last line.
_KEYS_PREAMBLE = r"""
import json, sys, torch
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from tessera._core.launch import capture, jit_specialization

def keys(call):
    spec = jit_specialization(call.launcher.kernel, call.args, call.constexprs, call.num_warps,
                              call.num_stages, make_backend(GPUTarget("cuda", 90, 32)))
    return [repr(call.key()), repr(spec[:3])]
"""


def _binder_keys(script: str) -> list:
    done = subprocess.run([sys.executable, "-c", _KEYS_PREAMBLE + script], capture_output=True, text=True,
                          env=compiler_env(), timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


_KEYS = r"""
from tessera.blas.kernels.gemm_tile import TileConfig, launch_gemm_tile, representative_launch
from tessera.rand.kernels import mrg, philox
from tessera.rand.space import MrgConfig, PhiloxConfig

config = TileConfig(64, 64, 32, 8, 4, 3)

def problem(m, n, k, c=None, batch=1, alpha=1.0, b_t=False):
    lead = (batch,) if batch > 1 else ()
    a, d = torch.empty(*lead, m, k), torch.empty(*lead, m, n)
    b = torch.empty(*lead, n, k).transpose(-1, -2) if b_t else torch.empty(*lead, k, n)  # x @ W.t()
    with capture() as calls:
        launch_gemm_tile(a, b, c, d, batch, alpha, 0.0 if c is None else 1.0, precision="ieee", upcast=False,
                         index_64=False, config=config)
    return keys(calls[0])

def draws(seed, subsequence, offset):
    out = torch.empty(1 << 20)
    with capture() as calls:
        philox.launch_stream(out, 2, seed, subsequence, offset, 0.0, 1.0, PhiloxConfig())
        mrg.launch_mrg(out, 1, seed, subsequence, offset, 0.0, 1.0, MrgConfig())
    return [keys(call) for call in calls]

with capture() as calls:
    representative_launch("gemm", config, "fp32", 132)
print(json.dumps([[keys(call) for call in calls], problem(2048, 512, 4096), problem(1000, 512, 4096),
                  problem(8, 512, 4096), problem(1, 512, 4096), problem(37, 512, 4096),
                  problem(2048, 1000, 4096), draws(0, 0, 0), draws(2**64 - 17, 2**40 + 1, 2**41 + 8),
                  problem(512, 2000, 64, c=torch.empty(512, 2000)),
                  problem(512, 2000, 64, c=torch.empty(2000).expand(512, 2000)),
                  problem(2048, 1001, 999), problem(64, 64, 64, batch=3), problem(37, 1001, 999),
                  problem(512, 2048, 256, alpha=0.125), problem(512, 2048, 256, alpha=-3.0),
                  problem(2048, 512, 4096, b_t=True), problem(1000, 512, 4096, b_t=True),
                  problem(1, 512, 4096, b_t=True)]))
"""


def test_pack_binaries_are_named_by_launch_keys_that_follow_triton() -> None:
    """A precompiled binary is found by the Launcher's key of a representative launch: the aligned
    one serves any problem of the same kind with sizes multiples of 16 (batched too), the odd-M one
    any M that is not (token counts), the one-row one M = 1, the C one any C (contiguous or a
    broadcast bias row), the scaled one any alpha ≠ 1, the odd ones N and K both not multiples of 16
    and N alone not, and the three row counts with B column-major (a linear layer's x @ W.t());
    odd M, N and K together have none (they go through the JIT) — exactly as Triton's own
    specialization is."""
    (representatives, aligned, odd_m, eight, one, other_odd_m, odd_n, first_draws, other_draws, with_c,
     with_bias, odd_nk, batched, odd_mnk, scaled, other_scaled, aligned_t, odd_m_t,
     one_t) = _binder_keys(_KEYS)
    representative = representatives[0]
    assert representative == aligned  # same launch key and same Triton specialization
    assert representative[0] != odd_m[0] and representative[1] != odd_m[1]
    assert "tt.divisibility" in representative[1]
    assert odd_m == representatives[2] == eight == other_odd_m  # M = 1000, 8, 37: one binary
    assert one == representatives[4]  # M = 1 is a constant to Triton
    assert [aligned_t, odd_m_t, one_t] == representatives[1:6:2] and aligned_t != aligned  # x @ W.t()
    assert odd_n == representatives[9]  # N = 1000, K = 4096: a vocabulary's LM head
    assert with_c == with_bias == representatives[6] and with_c != aligned
    assert scaled == other_scaled == representatives[7] and scaled != aligned  # any alpha ≠ 1
    assert odd_nk == representatives[8] and batched == aligned
    assert odd_mnk not in representatives
    # rand kernels take seeds and offsets unspecialized: one binary (and one pack file) for all
    assert first_draws == other_draws


_TMA_KEYS = r"""
from tessera.blas.kernels.gemm_tma import TmaConfig, launch_gemm_tma, representative_launch

config = TmaConfig(128, 256, 64, 8, 8, 3)

def problem(m, n, k, c=False, alpha=1.0, b_t=False):
    a, b, d = (torch.empty(r, s, dtype=torch.bfloat16) for r, s in ((m, k), (k, n), (m, n)))
    b = torch.empty(n, k, dtype=torch.bfloat16).t() if b_t else b  # x @ W.t()
    with capture() as calls:
        launch_gemm_tma(a, b, torch.empty_like(d) if c else None, d, alpha, 1.0 if c else 0.0,
                        precision="ieee", num_sms=132, config=config)
    return keys(calls[0])

with capture() as calls:
    representative_launch("gemm", config, "bf16", 132)
gemms = [keys(call) for call in calls if call.launcher.kernel.fn.__name__ == "_gemm_tma_kernel"]
print(json.dumps([gemms, problem(4096, 4096, 4096), problem(4008, 4096, 4096),
                  problem(4096, 4096, 4096, c=True), problem(4096, 4088, 1000), problem(8192, 14328, 4104),
                  problem(4096, 4096, 4096, alpha=0.25), problem(4096, 4096, 4096, b_t=True),
                  problem(4008, 4096, 4096, b_t=True)]))
"""


def test_tma_pack_binaries_cover_token_counts_c_and_sizes_aligned_to_8() -> None:
    """The TMA family's pack binaries serve what Hopper problems of at least one tile per SM look
    like: sizes multiples of 16, M not (token counts), a C operand, alpha ≠ 1, and N and K multiples
    of 8 only (TMA's limit: 16-byte rows; other sizes go to the tile family), and M aligned or not
    with B column-major (a linear layer's x @ W.t())."""
    reps, aligned, odd_m, with_c, odd_nk, llm_odd, scaled, aligned_t, odd_m_t = _binder_keys(_TMA_KEYS)
    assert [aligned, odd_m, with_c, odd_nk, scaled, aligned_t, odd_m_t] == reps and llm_odd == reps[3]



_COPY_KEYS = r"""
from tessera._core.launch import building_for
from tessera.blas.api import _k_major
from tessera.blas.kernels.gemm_tile import TileConfig, representative_launch

def copy_keys(calls):
    return [keys(call) for call in calls if call.launcher.kernel.fn.__name__ == "_copy_2d_kernel"]

def representatives(arch):
    with capture() as calls, building_for("cuda", arch):
        representative_launch("gemm", TileConfig(64, 64, 32, 8, 4, 3), "tf32", 132)
    return copy_keys(calls)

def copies(op_a, op_b):
    with capture() as calls, building_for("cuda", "sm_90"):
        _k_major(op_a, op_b, materialize=True)
    return copy_keys(calls)

print(json.dumps([representatives("sm_90"), representatives("sm_80"),
                  copies(torch.empty(4096, 4096), torch.empty(4096, 4096)),
                  copies(torch.empty(4104, 1000).t(), torch.empty(4104, 14336)),
                  copies(torch.empty(999, 4096).t(), torch.empty(999, 2056)),
                  copies(torch.empty(3, 512, 256).transpose(-1, -2), torch.empty(3, 512, 512))]))
"""


def test_packs_hold_the_k_major_copies_of_tf32_calls_on_hopper() -> None:
    """A tf32 GEMM on Hopper first copies B column-major (and a column-major op(A) row-major): the
    GEMM families' representative launches for TF32 keys include those copies for sm_90 (not for
    sm_80, which reads any layout), and their launch keys and Triton specializations are those of
    real calls' copies — square, an LLM layer's sizes with M and K not multiples of 16, batched — so
    a first tf32 call with a pack installed compiles nothing."""
    hopper, ampere, square, llm, odd, batched = _binder_keys(_COPY_KEYS)
    assert len(hopper) == 10 and not ampere
    assert len(square) == 1 and all(len(keys) == 2 for keys in (llm, odd, batched))
    for key in square + llm + odd + batched:
        assert key in hopper


_SPLIT_KEYS = r"""
from tessera._core.launch import building_for
from tessera.blas.kernels.gemm_tile import TileConfig, representative_launch
from tessera.blas import emulated

def split_keys(calls):
    return [keys(call) for call in calls if call.launcher.kernel.fn.__name__ == "_split_kernel"]

def representatives(dtype):
    with capture() as calls, building_for("cuda", "sm_90"):
        representative_launch("gemm", TileConfig(64, 64, 32, 8, 4, 3), dtype, 132)
    return split_keys(calls)

def promoted_keys(calls):
    return [keys(call) for call in calls if call.launcher.kernel.fn.__name__ == "_gemm_tma_kernel"
            and call.constexprs["PROMOTE"]]

def small_keys(calls):
    return [keys(call) for call in calls if call.launcher.kernel.fn.__name__ == "_gemm_ws_kernel"]

def promoted_representatives(arch):
    with capture() as calls, building_for("cuda", arch):
        representative_launch("gemm", TileConfig(64, 64, 32, 8, 4, 3), "bf16", 132)
    return [promoted_keys(calls), small_keys(calls)]

def call(precision, op_a, op_b, alpha=1.0):
    from_a, from_b = emulated.operand_pieces(precision)
    with capture() as calls, building_for("cuda", "sm_90"):
        a_pieces = emulated.pieces_of_a(op_a, from_a)
        b_pieces = emulated.pieces_of_b(op_b, from_b)
        total = torch.empty(a_pieces.shape[0], b_pieces.shape[1])
        if emulated.small_tile_target(a_pieces, b_pieces, total) is not None:  # else a bf16 GEMM's launch
            emulated.small_products(a_pieces, b_pieces)
        a0, b0 = emulated.first_pieces(a_pieces, b_pieces, precision, op_a.shape[1])
        d = torch.empty(op_a.shape[0], op_b.shape[1])
        target = emulated.promoting_target(a0, b0, d)
        if target is not None:
            emulated.promoted_product(a0, b0, torch.empty_like(d), d, alpha, target, clean=True)
    return [split_keys(calls), promoted_keys(calls), small_keys(calls)]

print(json.dumps([representatives("bf16"), representatives("fp16"), promoted_representatives("sm_90"),
                  promoted_representatives("sm_80"),
                  call("bf16x9", torch.empty(4096, 4096), torch.empty(4096, 4096)),
                  call("bf16x6", torch.empty(4104, 1000).t(), torch.empty(4104, 14336), 0.5),
                  call("bf16x9", torch.empty(999, 4095), torch.empty(2056, 4095).t()),
                  call("bf16x6", torch.empty(8, 77), torch.empty(77, 3))]))
"""


def test_packs_hold_the_splits_of_the_bf16_product_precisions() -> None:
    """A bf16x9 / bf16x6 call first splits op(A) and op(B) into bf16 pieces, then runs bf16 GEMMs:
    the GEMM families' bf16 representative launches include the splits (not fp16's), and real
    calls' split keys and Triton specializations are among them — square, an LLM layer's sizes
    with op(A) column-major, odd sizes with B column-major, small odd ones — so such a first call
    with a pack compiles no split. On Hopper the representative launches hold the promoted a₀·b₀
    GEMM too (16 specializations: M, N, K' a multiple of 16 or not, alpha 1 or not), among them
    the real calls' of a full wave (the small odd call runs the plain bf16 GEMM: too small for
    descriptors), and the small products' GEMM on ``emulated.SMALL_TILE`` (8 specializations),
    among them the real calls' that take it; none for an Ampere target."""
    bf16, fp16, (hopper, hopper_small), ampere, *calls = _binder_keys(_SPLIT_KEYS)
    assert len(bf16) == 2 * 2 * 18 and not fp16  # precisions, operands, sizes and layouts
    assert len(set(map(str, hopper))) == 16 and ampere == [[], []]
    assert len(set(map(str, hopper_small))) == 8  # M, N, K a multiple of 16 or not
    # built for a GPU's SM count, not for 1 (which Triton would make a constant no real call has)
    assert all("'NUM_SMS': 'i32'" in spec for _, spec in hopper)
    for splits, promoted, small in calls:
        assert len(splits) == 2 and all(key in bf16 for key in splits), splits
        assert all(key in hopper for key in promoted), promoted
        assert all(key in hopper_small for key in small), small
    assert [len(promoted) for _, promoted, _ in calls] == [1, 1, 1, 0]
    assert [len(small) for _, _, small in calls] == [1, 1, 0, 0]  # 3.9 and 3.4 waves of 128×256 tiles


def test_cli_end_to_end_on_this_machine(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """Build a pack for the running arch, install it, and GEMM selects through its logic."""
    from tessera import device_info

    arch = device_info().arch
    pack = tmp_path / "mine.tar.gz"
    assert main(["pack", "build", "--arch", arch, "-o", str(pack)]) == 0
    assert main(["pack", "install", str(pack)]) == 0
    assert main(["pack", "list"]) == 0
    out = capsys.readouterr().out
    assert f"built {pack}" in out and "installed tessera-" in out and "current" in out
    assert "logic only" in out  # built without --precompile
    assert main(["report", "--bench", "none", "-o", str(tmp_path / "report")]) == 0
    assert "; logic only)" in (tmp_path / "report" / "report.md").read_text()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    a, b = torch.randn(50, 40, device=device), torch.randn(40, 30, device=device)
    choice = explain(a, b)
    assert "current/logic" in choice.reason or "/packs/" in choice.reason, choice.reason
    assert_gemm_close(gemm(a, b), a, b)
    assert main(["pack", "verify"]) == 0
    assert main(["pack", "install", str(tmp_path / "missing.tar.gz")]) == 2
    assert "not a readable pack" in capsys.readouterr().err
    assert main(["pack", "remove"]) == 0 and main(["pack", "rollback"]) == 2


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "b_col_major"), [("bf16", False), ("bf16", True), ("tf32", False)],
                         ids=["b-row-major", "x@W.t()", "tf32"])
def test_first_call_with_a_pack_compiles_nothing(dtype: str, b_col_major: bool, tmp_path: Path) -> None:
    """A fresh process with the pack installed runs bf16 4096³ from the precompiled binary, B
    row-major and a transposed view (a linear layer's x @ W.t()), and tf32 (on Hopper B's K-major
    copy, then the GEMM): zero Triton compilations (counted by wrapping triton.compile), a correct
    result."""
    from tessera import device_info
    from tessera.blas import space

    folder = tmp_path / "logic"
    folder.mkdir()
    for doc in space.heuristic_logic(device_info()):
        if doc["problem"]["dtype"] == dtype:
            (folder / f"blas.gemm.{dtype}.yaml").write_text(yaml.safe_dump(doc))
    built = packs.build_pack(device_info().arch, tmp_path / "p.tar.gz", logic_dir=folder, precompile=True)
    assert all(row["status"] == "ok" for row in built.manifest["support"]), built.manifest["support"]
    assert main(["pack", "install", str(built.path)]) == 0
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "first_call.py"
    env = dict(os.environ, PYTHONPATH=str(script.parents[1]), TESSERA_KERNEL_CACHE="0")  # the pack alone
    flags = ["--dtype", dtype] + (["--b-col-major"] if b_col_major else [])
    done = subprocess.run([sys.executable, str(script), "--child", "tessera", *flags], capture_output=True,
                          text=True, env=env, timeout=600, check=False)
    result = json.loads(next(line[7:] for line in done.stdout.splitlines() if line.startswith("RESULT ")))
    assert result["triton_compiles"] == 0 and result["pack_loads"] >= (2 if dtype == "tf32" else 1), result
    assert result["relative_error"] < 1e-2, result  # bf16 output: 2⁻⁸ relative rounding; tf32 inputs: 2⁻¹¹


@pytest.mark.gpu
def test_gpu_kernel_cache_first_call(tmp_path: Path) -> None:
    """Without a pack, a second fresh process finds the binary the first one's JIT compiled in
    the kernel cache: zero Triton compilations, the binary loaded as a pack's, a correct result."""
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "first_call.py"
    env = dict(os.environ, PYTHONPATH=str(script.parents[1]), TESSERA_HOME=str(tmp_path),
               TESSERA_KERNEL_CACHE="1")
    results = []
    for _ in range(2):
        done = subprocess.run([sys.executable, str(script), "--child", "tessera", "--size", "4096"],
                              capture_output=True, text=True, env=env, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-3000:]
        results.append(json.loads(next(line[7:] for line in done.stdout.splitlines()
                                       if line.startswith("RESULT "))))
    assert results[1]["triton_compiles"] == 0 and results[1]["pack_loads"] >= 1, results
    assert results[1]["relative_error"] < 1e-2, results
