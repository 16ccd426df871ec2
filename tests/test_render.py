"""benchmarks/render.py builds BENCHMARKS.md from the committed results without error, its
summary of the issues' targets first."""

from __future__ import annotations

from benchmarks import render


def test_render_summarizes_the_targets_from_committed_results() -> None:
    text = render.render()
    heading = "## The issues' targets in the newest run of each benchmark"
    summary = text.split(heading, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in summary.splitlines() if line.startswith("| ") and "---" not in line][1:]
    names = [row.split(" | ")[0] for row in rows]
    for expected in ("| square grid geomean", "| W4A16 M = 16 vs bf16 torch.matmul",
                     "| symv bf16 8192²: % of copy (graphs)", "| first bf16 call with a pack"):
        assert any(name.startswith(expected) for name in names), expected
    for row in rows:  # each verdict agrees with its figure and bound
        name, bound, measured, verdict, _ = (cell.strip() for cell in row.strip("| ").split(" | "))
        value, limit = float(measured.split()[0]), float(bound.split()[1])
        met = value <= limit if bound.startswith("≤") else value >= limit
        met = met and ("compiles)" not in name or "(0 compiles)" in name)  # a first call must compile nothing
        assert verdict == ("met" if met else "**missed**"), row


def test_the_targets_summary_takes_runs_of_the_targets_gpu_only(tmp_path, monkeypatch) -> None:
    """A newer run on another GPU (an H100 lent for an H200) appears in its section, not in the
    summary of the targets, which are the H200's figures."""
    import json
    import shutil

    for name in ("quantized-h100-68d9857.json", "quantized-h200-80b019b.json"):
        shutil.copy(render.RESULTS / name, tmp_path / name)
    monkeypatch.setattr(render, "RESULTS", tmp_path)
    newer = json.loads((tmp_path / "quantized-h100-68d9857.json").read_text())
    assert "H200" not in newer["device"] and newer["created"] > json.loads(
        (tmp_path / "quantized-h200-80b019b.json").read_text())["created"]
    path, data = render._newest("quantized-*.json")
    assert path.name == "quantized-h200-80b019b.json" and "H200" in data["device"]


def _level12_summary(rows: list[dict], tmp_path, monkeypatch) -> str:
    """The targets summary of a results folder holding one H200 level-1/2 result with ``rows``."""
    import json

    (tmp_path / "blas-l12-h200-test.json").write_text(json.dumps(
        {"device": "NVIDIA H200", "created": "2026-12-05T13:00:00Z", "rows": rows}))
    monkeypatch.setattr(render, "RESULTS", tmp_path)
    return "\n".join(render._targets_summary())


def test_a_figure_next_to_its_bound_is_shown_on_its_verdicts_side(tmp_path, monkeypatch) -> None:
    """0.99957× torch is a miss of "≥ 1.0": shown as 0.9996, not as a 1.000 beside "missed"."""

    rows = [{"routine": "copy", "torch": "y.copy_(x)", "graph_pct_copy": 99.7, "graph_vs_torch": 0.99957,
             "vs_torch": 1.0015},
            {"routine": "axpy", "torch": "y.add_(x, alpha)", "graph_pct_copy": 103.2,
             "graph_vs_torch": 1.0048, "vs_torch": 1.0052}]
    summary = _level12_summary(rows, tmp_path, monkeypatch)
    assert "| copy: vs y.copy_(x) (graphs) | ≥ 1.0 | 0.9996 (flushed 1.002) | **missed** |" in summary
    assert "| axpy: vs y.add_(x, alpha) (graphs) | ≥ 1.0 | 1.005 (flushed 1.005) | met |" in summary


def test_level12_rows_of_tessera_bench_blas_are_judged_as_the_earlier_form(tmp_path, monkeypatch) -> None:
    """benchmarks/blas_level12.py writes `tessera bench blas`'s rows since the fifty-first session
    (named by problem, fields after the vendor): the summary judges the issue's routines in them as
    in the earlier form (square sizes named N², as there) and leaves out the strided, batched and
    trsv rows."""

    def row(routine: str, problem: str, pct: float, versus: float | None, **extra) -> dict:
        return {"routine": routine, "problem": problem, "inc": 1, "batch": 1, "vendor": "torch.dot",
                "pct_copy": pct, "gbs": 1.0, "pct_copy_graph": pct, "gbs_graph": 1.0,
                **({"vs_vendor": versus, "vs_vendor_graph": versus} if versus else {}), **extra}

    rows = [row("dot", "dot fp32 2^26", 96.0, 1.02), row("dot", "dot fp32 2^25 inc 2", 50.0, 0.5, inc=2),
            row("dot", "dot fp32 2^14 batch 4096", 40.0, 0.4, batch=4096),
            row("trsv", "trsv fp32 8192x8192", 3.0, None), row("symv", "symv bf16 8192x8192", 74.0, None)]
    summary = _level12_summary(rows, tmp_path, monkeypatch)
    assert "| dot fp32 2^26: vs torch.dot (graphs) | ≥ 1.0 | 1.020 (flushed 1.020) | met |" in summary
    assert "| symv bf16 8192²: % of copy (graphs) | ≥ 85 | 74.0 | **missed** |" in summary
    assert "inc 2" not in summary and "batch" not in summary and "trsv" not in summary


def test_grid_geomeans_keep_the_issues_fp32_rows_apart_from_the_tensor_core_ones() -> None:
    """The issue's grid takes IEEE fp32; tf32x3, bf16x9 and bf16x6 rows make lines of their own,
    never the issue's figure."""
    def row(dtype: str, size: int, ratio: float) -> dict:
        return {"m": size, "n": size, "k": size, "batch": 1, "trans_a": False, "trans_b": False,
                "dtype": dtype, "ratio": ratio, "ratio_graph": ratio}

    rows = [row(d, s, r) for d, r in (("bf16", 1.0), ("fp16", 1.0), ("tf32", 1.0), ("fp32", 0.5),
                                      ("bf16x9", 2.0), ("bf16x6", 4.0)) for s in (1024, 2048)]
    lines = render._geomeans(rows, gains=False)
    issue = next(line for line in lines if line.startswith("- the issue's grid"))
    assert "8 rows: **0.841×** flushed" in issue  # 0.5^(2/8)
    bf16x9 = next(line for line in lines if "bf16x9 as its float32 rows" in line)
    assert "8 rows: **1.189×** flushed" in bf16x9  # 2^(2/8)
    bf16x6 = next(line for line in lines if "bf16x6 as its float32 rows" in line)
    assert "8 rows: **1.414×** flushed" in bf16x6  # 4^(2/8)
    assert not any("tf32x3 as its float32 rows" in line for line in lines)  # no tf32x3 rows timed
