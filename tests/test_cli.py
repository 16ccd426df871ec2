"""The ``tessera`` command line: info, bench gemm, JSON output, bad arguments."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tessera.cli import main


def test_info_json(capsys: pytest.CaptureFixture) -> None:
    assert main(["info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert {"arch", "backend", "peak_tflops", "versions"} <= info.keys()


def test_bench_one_problem_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "sub" / "gemm.json"
    assert main(["bench", "gemm", "-m", "20", "-n", "12", "-k", "9", "--dtype", "fp32",
                 "--trans-b", "--rounds", "1", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "fp32 NT 20x12x9" in out and "ratio" in out
    data = json.loads(path.read_text())
    (row,) = data["rows"]
    assert row["m"] == 20 and row["trans_b"] and row["tessera_ms"] > 0 and row["vendor_ms"] > 0
    assert row["rel_err_vs_vendor"] < 1e-5
    assert data["device"]["arch"] and "git_revision" in data
    assert not list(path.parent.glob(".*.tmp")), "temporary file left behind"


def test_bench_vs_heuristic_times_the_untuned_pick(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """With installed logic choosing another kernel, --vs-heuristic times the heuristic's pick in
    the same rounds and reports both kernels and the gain."""
    import yaml

    from tessera import device_info
    from tessera.tuning import logic

    arch = device_info().arch
    folder = Path(os.environ["TESSERA_HOME"]) / "current" / "logic" / arch
    folder.mkdir(parents=True)
    doc = {"schema": 1, "arch": arch, "library": "blas", "op": "gemm", "problem": {"dtype": "fp32"},
           "solutions": [{"id": 0, "kernel": "gemm_tile", "block_m": 16, "block_n": 16, "block_k": 16,
                          "group_m": 1, "num_warps": 2, "num_stages": 1}],
           "table": [{"m": 20, "n": 12, "k": 9, "batch": 1, "solution": 0}]}
    (folder / "blas.gemm.fp32.yaml").write_text(yaml.safe_dump(doc))
    logic.reload()
    path = tmp_path / "gemm.json"
    try:
        assert main(["bench", "gemm", "-m", "20", "-n", "12", "-k", "9", "--dtype", "fp32", "--rounds", "1",
                     "--vs-heuristic", "--json", str(path)]) == 0
    finally:
        logic.reload()
    (row,) = json.loads(path.read_text())["rows"]
    assert row["kernel"] == "gemm_tile 16x16x16 g1 w2 s1" != row["heuristic_kernel"]
    assert row["heuristic_ms"] > 0 and row["tuned_gain"] == row["heuristic_ms"] / row["tessera_ms"]
    if "ratio_graph" in row:  # on a GPU the heuristic is graph-timed too
        assert row["tuned_gain_graph"] == row["heuristic_ms_graph"] / row["tessera_ms_graph"]
    assert "tuned/heuristic" in capsys.readouterr().out


def test_quick_preset_without_gpu_uses_interpreter_sizes(capsys: pytest.CaptureFixture) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("on a GPU --quick runs GPU-sized problems")
    assert main(["bench", "gemm", "--quick"]) == 0
    out = capsys.readouterr().out
    assert "Triton's CPU interpreter" in out
    assert "bf16 NT 64x48x40" in out


@pytest.mark.parametrize("argv,message", [
    (["bench", "gemm", "-m", "4"], "give -m, -n and -k"),
    (["bench", "gemm", "--quick", "-m", "4"], "not both"),
    (["bench", "gemm", "-m", "-1", "-n", "2", "-k", "2"], "-m must be non-negative"),
    (["bench", "gemm", "-m", "2", "-n", "2", "-k", "2", "--batch", "0"], "--batch must be at least 1"),
    # a path that cannot be written: a message, not a traceback, and before any benchmark runs
    (["report", "--bench", "none", "-o", "/proc/tessera-report"], "/proc/tessera-report: "),
])
def test_bad_arguments_exit_2_with_message(argv: list[str], message: str,
                                           capsys: pytest.CaptureFixture) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("argv,message", [
    (["pack", "build", "--arch", "nonsense", "-o", "x.tar.gz"], "'nonsense' is not an architecture name"),
    (["pack", "build", "--arch", "gfx1103", "-o", "."], "is a directory; give the pack's file path"),
    (["logic", "show", "binary.yaml"], "binary.yaml: not UTF-8 text"),
])
def test_bad_paths_and_names_exit_2_with_message(argv: list[str], message: str, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture) -> None:
    """Found by fuzzing the command line: an arch that is no architecture's name built a pack
    of the heuristic's logic for a "hip" GPU nothing is, a directory as -o and a binary logic
    file raised tracebacks (pathlib's ValueError, UnicodeDecodeError)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "binary.yaml").write_bytes(bytes(range(128, 256)))
    assert main(argv) == 2
    assert message in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["binary.yaml"], "nothing written"


class _ClosedPipe(io.TextIOBase):
    """A standard output whose reader has gone (``| head``): every write raises EPIPE."""

    def __init__(self, fd: int) -> None:
        self._fd = fd

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        return self._fd


def test_a_reader_that_stops_early_is_no_path_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture) -> None:
    """`tessera logic show FILE | head` said "Broken pipe; check the path and its permissions"."""
    with open(tmp_path / "stdout", "w") as target:
        monkeypatch.setattr(sys, "stdout", _ClosedPipe(target.fileno()))
        shipped = Path(__file__).parents[1] / "tessera/logic/sm_90/blas.gemm.fp16.yaml"
        assert main(["logic", "show", str(shipped)]) == 141  # a shell's status for SIGPIPE
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("budget", ["0", "-1", "nan", "soon"])
def test_tuning_budget_must_be_positive(budget: str, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["tune", "gemm", "--dtype", "bf16", "--budget-minutes", budget, "--out", "unused"])
    assert exit_.value.code == 2
    assert f"{budget!r} is not a positive number" in capsys.readouterr().err


def test_python_dash_m_entry_point() -> None:
    result = subprocess.run([sys.executable, "-m", "tessera", "info"], capture_output=True, text=True,
                            timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "arch" in result.stdout


def test_report_writes_json_and_markdown(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("the GPU report runs the quick preset (minutes); checked by hand there")
    assert main(["report", "-o", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["device"]["arch"] and data["packs"] == [] and len(data["gemm"]) == 4
    assert {r["routine"] for r in data["blas"]} >= {"axpy", "symv", "trsv"} and all(
        r["correct"] for r in data["blas"])
    text = (tmp_path / "report.md").read_text()
    assert "# Tessera report" in text and "installed pack | none" in text and "ratio" in text
    assert "torch equivalent" in text and "symv fp32 75x75" in text and "CPU interpreter" in text


def test_bench_rand_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("the GPU preset draws 2^26 values; run by hand there")
    path = tmp_path / "rand.json"
    assert main(["bench", "rand", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())["rows"]
    assert {r["distribution"] for r in rows} == {"uniform", "normal"}
    assert {r["generator"] for r in rows} == {"philox4x32_10", "mrg32k3a", "sobol32"}
    assert all(r["tessera_gbs"] > 0 and r["copy_gbs"] > 0 for r in rows)
    assert "% copy" in capsys.readouterr().out


def test_bench_blas_checks_and_times_every_routine(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """`tessera bench blas` on the interpreter preset: every level-1/2 routine checked against fp64
    (strided axpy too), timed beside its torch equivalent where torch has one, as % of copy."""
    import torch

    from tessera.blas.bench_level12 import PRESETS, ROUTINES

    if torch.cuda.is_available():
        pytest.skip("on a GPU the quick preset runs 2^24 elements; run by hand there")
    path = tmp_path / "blas.json"
    assert main(["bench", "blas", "--json", str(path)]) == 0
    rows = json.loads(path.read_text())["rows"]
    assert [r["problem"] for r in rows] == [c.describe() for c in PRESETS["interpreter"]]
    assert {r["routine"] for r in rows} == set(ROUTINES)
    for r in rows:
        assert r["correct"] and r["rel_err"] < 1e-5 and r["tessera_ms"] > 0 and r["pct_copy"] > 0, r
        assert ("vs_vendor" in r) == (r["routine"] not in ("swap", "rot")), r
    assert "axpy fp32 1000 inc 3" in capsys.readouterr().out


def test_bench_blas_reports_a_wrong_result(monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture) -> None:
    """A routine whose result is wrong is flagged in the table and the exit status, not timed as if fine."""
    import torch

    from tessera.blas import level1

    monkeypatch.setattr(level1, "dot", lambda x, y, **kw: torch.zeros((), dtype=x.dtype))
    assert main(["bench", "blas", "-f", "dot,nrm2", "-n", "500", "--rounds", "1"]) == 1
    captured = capsys.readouterr()
    assert "WRONG" in captured.out and "wrong results" in captured.err and "dot fp32 500" in captured.err
    assert "nrm2 fp32 500" not in captured.err


@pytest.mark.parametrize("argv, message", [
    (["-f", "axpy,bogus", "-n", "10"], "-f takes routines among"),
    (["-n", "10"], "need -f"),
    (["-f", "axpy"], "-f needs -n"),
    (["-f", "axpy", "-n", "0"], "sizes must be n ≥ 1"),
    (["-f", "gemv_n", "-n", "8", "--inc", "2"], "unit increments"),
    (["-f", "symv", "-n", "8", "--batch", "2"], "batched cases are dot, nrm2"),
    (["-f", "dot", "-n", "8", "--batch", "2", "--inc", "2"], "with unit increments"),
    (["-f", "dot", "-n", "8", "--batch", "0"], "batch ≥ 1"),
    (["-f", "dot", "-n", "8", "--inc", "0"], "inc ≥ 1"),
    (["--batch", "2"], "need -f"),
    (["--rounds", "0"], "--rounds must be at least 1"),
])
def test_bench_blas_refuses_bad_arguments(argv: list[str], message: str,
                                          capsys: pytest.CaptureFixture) -> None:
    assert main(["bench", "blas", *argv]) == 2
    assert message in capsys.readouterr().err


def test_blas_case_counts_the_bytes_a_routine_must_move() -> None:
    from tessera.blas.bench_level12 import BlasCase

    assert BlasCase("axpy", 1 << 26).bytes_moved == 3 * 4 << 26
    assert BlasCase("iamax", 1000, "fp64", inc=5).bytes_moved == 8000  # strided: the elements, not the gaps
    assert BlasCase("symv", 8192, "bf16", m=5).bytes_moved == (8192 * 8193 // 2 + 2 * 8192) * 2  # m ignored
    assert BlasCase("gemv_t", 72, "fp16", m=40).bytes_moved == (40 * 72 + 72 + 40) * 2
    assert BlasCase("ger", 72, m=40).bytes_moved == (2 * 40 * 72 + 40 + 72) * 4
    assert BlasCase("dot", 1 << 14, batch=4096).bytes_moved == 2 * 4 << 26  # every row's
    assert BlasCase("gemv_n", 256, "bf16", batch=1024).bytes_moved == 1024 * (256 * 256 + 2 * 256) * 2
    assert BlasCase("nrm2", 300, batch=3).describe() == "nrm2 fp32 300 batch 3"


def test_bench_blas_rounds_reverse_their_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """tessera bench blas warms up with the side its first round times first, then times Tessera,
    the vendor and the copy in each round in the reverse order of the one before (a time can
    depend on the kernel just before it)."""
    from tessera.blas import bench_level12

    order: list[tuple[str, object]] = []
    copy = (lambda: None, 8)
    monkeypatch.setattr(bench_level12, "warm_up", lambda fn: order.append(("warm-up", fn)))
    monkeypatch.setattr(bench_level12, "flushed_ms", lambda fn: order.append(("flushed", fn)) or 1.0)
    row = bench_level12.run_case(bench_level12.BlasCase("axpy", 64), rounds=3, copy=copy)
    sides = [fn for kind, fn in order if kind == "flushed"]
    ours, vendor = sides[0], sides[1]
    assert order[0] == ("warm-up", ours) and len(order) == 10
    assert sides == [ours, vendor, copy[0], copy[0], vendor, ours, ours, vendor, copy[0]]
    assert ours is not vendor and row["rounds"] == 3


@pytest.mark.gpu
def test_bench_blas_on_the_gpu_times_graphs_too(tmp_path: Path) -> None:
    """On a GPU both sides and the copy are also replayed from CUDA graphs (the eager figures of a
    short vector call measure the host)."""
    path = tmp_path / "blas.json"
    assert main(["bench", "blas", "-f", "axpy,dot,gemv_t,symv,trsv", "-n", "4096", "--rounds", "1",
                 "--json", str(path)]) == 0
    rows = json.loads(path.read_text())["rows"]
    assert all(r["correct"] and r["gbs_graph"] > 0 and r["pct_copy_graph"] > 0 for r in rows), rows
    assert all("vs_vendor_graph" in r for r in rows if r["routine"] != "trsv")


def test_the_copy_ceiling_is_sized_by_the_cases_up_to_the_issues_level1_copy() -> None:
    """The copy timed beside a run moves the largest case's bytes, but no more than a copy of 2^26
    fp32 values (a larger one ran ~20 % slower replayed from graphs on an H100)."""
    from tessera.blas.bench_level12 import COPY_CEILING_BYTES, PRESETS, BlasCase, ceiling_copy

    assert COPY_CEILING_BYTES == 8 << 26
    assert max(c.bytes_moved for c in PRESETS["full"]) > COPY_CEILING_BYTES
    assert ceiling_copy(PRESETS["full"])[1] == COPY_CEILING_BYTES
    assert ceiling_copy([BlasCase("dot", 1000)])[1] == 8000  # off a GPU: the case's own bytes
