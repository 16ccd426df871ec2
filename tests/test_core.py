"""tessera._core: device facts, validation helpers, logging."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch

import tessera
from tessera._core import log, timing
from tessera._core.device import dtype_key, precision_of, torch_dtype
from tessera._core.recipes import RecipeTable
from tessera._core.validate import check_no_overlap, max_offset, needs_int64_index
from tessera.blas import gemm


def test_device_info_fields() -> None:
    info = tessera.device_info()
    assert info.backend in ("cuda", "hip", "interpreter")
    assert info.arch
    assert info.warp_size in (32, 64)
    assert info.versions["torch"] == torch.__version__
    assert info.versions["tessera"] == tessera.__version__
    assert "arch" in info.as_dict()
    if info.backend == "interpreter":
        assert info.peak("bf16") is None  # unknown peaks are None, never a guess


@pytest.mark.gpu
def test_device_info_gpu_arch() -> None:
    info = tessera.device_info()
    assert info.arch.startswith(("sm_", "gfx"))
    assert info.multiprocessors and info.multiprocessors > 0


def test_dtype_keys() -> None:
    assert dtype_key(torch.float32, "tf32") == "tf32"
    assert dtype_key(torch.float32, "tf32x3") == "tf32x3"
    assert dtype_key(torch.float32) == "fp32"
    assert dtype_key(torch.bfloat16) == "bf16"
    assert dtype_key(torch.bfloat16, "tf32x3") == "bf16"  # the precisions are float32's
    for key in ("fp32", "tf32", "tf32x3"):
        assert torch_dtype(key) == torch.float32
        assert dtype_key(torch.float32, precision_of(key)) == key
    assert precision_of("bf16") == "ieee"


def test_tf32x3_peak_is_a_third_of_tf32() -> None:
    """tf32x3's useful rate: three TF32 products for each float32 one."""
    from tessera._core.device import _peaks_for

    peaks, _ = _peaks_for("sm_90", "NVIDIA H200")
    assert peaks["tf32x3"] == pytest.approx(peaks["tf32"] / 3)
    assert "tf32x3" not in _peaks_for("gfx1103", "AMD Radeon 780M")[0]  # no peaks known there


def test_int64_index_detection_on_meta_tensors() -> None:
    small = torch.empty_strided((1024, 1024), (1024, 1), device="meta")
    huge = torch.empty_strided((2**16, 2**16), (2**16, 1), device="meta")
    assert not needs_int64_index(small)
    assert needs_int64_index(small, huge)
    assert max_offset(huge) == 2**32 - 1


def test_overlap_of_disjoint_slices_is_allowed() -> None:
    base = torch.zeros(10)
    check_no_overlap("out", base[5:], {"a": base[:5]})


def test_trace_and_bench_logging(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture,
                                 device: str) -> None:
    monkeypatch.setenv("TESSERA_LOG", "trace,bench")
    gemm(torch.randn(3, 20, 30, device=device), torch.randn(30, 10, device=device))
    text = capfd.readouterr().err
    assert "trace: gemm m=20 n=10 k=30 batch=3 dtype=fp32" in text
    assert "gemm_tile" in text
    assert "bench: tessera bench gemm -m 20 -n 10 -k 30 --dtype fp32 --batch 3" in text
    monkeypatch.delenv("TESSERA_LOG")
    assert not log.trace_enabled()


def test_write_atomically_replaces_whole_or_not_at_all(tmp_path: Path) -> None:
    """The file is replaced only once the written copy passes the check; a failing check leaves
    the old content and no temporary file behind."""
    from tessera._core.files import write_atomically

    path = tmp_path / "sub" / "file.txt"
    write_atomically(path, "first\n")  # the folder is made
    assert path.read_text() == "first\n"

    def refuse(written: Path) -> None:
        assert written.read_text() == "second\n"  # the check sees the new text, not the old file
        raise tessera.LogicFileError("refused")

    with pytest.raises(tessera.LogicFileError):
        write_atomically(path, "second\n", check=refuse)
    assert path.read_text() == "first\n"
    assert sorted(p.name for p in path.parent.iterdir()) == ["file.txt"]
    write_atomically(path, "third\n", check=lambda written: None)
    assert path.read_text() == "third\n"


def test_per_call_us_times_the_calls_after_the_warmup(monkeypatch: pytest.MonkeyPatch) -> None:
    """Host time per call: warm-up calls first, untimed; the timed loop's wall time over its calls."""
    clock = iter([10.0, 10.5])  # the two readings around the timed loop
    monkeypatch.setattr(timing.time, "perf_counter", lambda: next(clock))
    calls = []
    assert timing.per_call_us(lambda: calls.append(1), calls=250, warmup=7) == pytest.approx(2000.0)
    assert len(calls) == 257


def test_launch_settings_record_what_changes_launches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Benchmark results carry the TESSERA_* settings that change which binaries run, where set."""
    monkeypatch.delenv("TESSERA_PDL", raising=False)
    monkeypatch.delenv("TESSERA_DIRECT_LAUNCH", raising=False)
    monkeypatch.delenv("TESSERA_RAW_LAUNCH", raising=False)
    assert timing.launch_settings() == {}
    monkeypatch.setenv("TESSERA_PDL", "exit")
    assert timing.launch_settings() == {"TESSERA_PDL": "exit"}
    monkeypatch.setenv("TESSERA_RAW_LAUNCH", "0")
    assert timing.launch_settings() == {"TESSERA_PDL": "exit", "TESSERA_RAW_LAUNCH": "0"}
    monkeypatch.delenv("TESSERA_RAW_LAUNCH")
    assert timing.run_record("x")["settings"] == {"TESSERA_PDL": "exit"}


def test_write_result_replaces_the_file_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A result written over an earlier one is the new JSON; a write that fails midway (a full
    disk, a kill) leaves the earlier file as it was, not a truncated one."""
    out = tmp_path / "sub" / "result.json"
    timing.write_result(out, {**timing.run_record("x"), "rows": [1]})
    timing.write_result(str(out), {"rows": [1, 2]})
    assert json.loads(out.read_text()) == {"rows": [1, 2]}

    def fail(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError):
        timing.write_result(out, {"rows": [1, 2, 3]})
    assert json.loads(out.read_text()) == {"rows": [1, 2]}
    assert [p.name for p in out.parent.iterdir()] == ["result.json"]  # no temporary file left


def test_bench_rounds_alternate_which_side_runs_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """tessera bench times torch first in even rounds and Tessera first in odd ones (a time can
    depend on the kernel just before it), for the L2-flushed and the back-to-back timings alike."""
    from tessera.blas import bench

    order: list[tuple[str, str]] = []

    def timer(kind: str):
        return lambda fn: order.append((kind, fn.__name__)) or 1.0

    monkeypatch.setattr(bench, "flushed_ms", timer("flushed"))
    monkeypatch.setattr(bench, "back_to_back_ms", timer("b2b"))
    monkeypatch.setattr(bench, "warm_up", timer("warm-up"))
    row = bench.run_case(bench.GemmCase(16, 16, 16, "fp32"), rounds=2)
    order = [entry for entry in order if entry[1] in ("vendor", "ours")]  # not the copy's timings
    assert order == [("warm-up", "vendor"),  # the side the first round times first
                     ("flushed", "vendor"), ("flushed", "ours"), ("b2b", "vendor"), ("b2b", "ours"),
                     ("flushed", "ours"), ("flushed", "vendor"), ("b2b", "ours"), ("b2b", "vendor")]
    assert row["ratio"] == 1.0 and row["rounds"] == 2


def test_graph_rounds_interleaves_the_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    """graph_rounds times every case once a round, each round in the reverse order of the one
    before (off the GPU each timing is a wall-clock median of the first call: four calls), and
    keeps each case's samples apart; the first case warms the GPU up first (its logic put in
    place by ``before``)."""
    order: list[str] = []
    cases = {name: [lambda name=name: order.append(name)] for name in ("a", "b")}
    times = timing.graph_rounds(cases, 3)
    assert list(times) == ["a", "b"] and all(len(samples) == 3 for samples in times.values())
    assert order == ["a"] * 4 + ["b"] * 4 + ["b"] * 4 + ["a"] * 4 + ["a"] * 4 + ["b"] * 4
    order.clear()
    warmed: list[object] = []

    def warm_up(fn: object, ms: float) -> None:
        warmed.append((fn, ms))
        order.append("warm-up")

    monkeypatch.setattr(timing, "warm_up", warm_up)
    timing.graph_rounds(cases, 2, before=lambda name: order.append(f"before {name}"))
    assert order == ["before a", "warm-up", *["a"] * 4, "before b", *["b"] * 4, "before b", *["b"] * 4,
                     "before a", *["a"] * 4]
    assert warmed == [(cases["a"][0], 100.0)]
    warmed.clear()
    timing.graph_rounds(cases, 1, warmup_ms=0)
    assert warmed == []


def test_recipe_table_keeps_by_value_refuses_and_stays_bounded() -> None:
    table: RecipeTable[str] = RecipeTable(limit=4)
    assert table.get("k") is None and table.wanted("k") and not table.wanted(None)
    table.put("k", "any alpha")
    assert table.get("k", (2.0,)) == "any alpha" and table.get("k", (3.0,)) == "any alpha"
    table.put("v", "alpha 2 only", by_value=(2.0,))
    assert table.get("v", (2.0,)) == "alpha 2 only"
    assert table.get("v", (3.0,)) is None and table.wanted("v")  # another value records its own
    table.put("v", "alpha 3 only", by_value=(3.0,))
    assert table.get("v", (2.0,)) == "alpha 2 only" and table.get("v", (3.0,)) == "alpha 3 only"
    assert sorted(table.recipes()) == ["alpha 2 only", "alpha 3 only", "any alpha"]  # markers left out
    table.refuse("n")  # the fifth entry: the full table was emptied first
    assert len(table) == 1 and table.get("n") is None and not table.wanted("n")
    assert table.get("k") is None and table.wanted("k")
    table.clear()
    assert len(table) == 0 and table.wanted("n")
