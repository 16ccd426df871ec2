"""benchmarks/logic_moves.py: the shapes two versions of a logic file choose differently for (what
an A/B of them through calls, benchmarks/logic_rows_ab.py, should time); logic_dp_rows.py: stream-K
rows given their best data-parallel candidate."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from test_logic import GOOD, UPDATE, WAVES, write

from benchmarks import logic_dp_rows, logic_moves
from tessera.tuning import load_logic


def test_moved_lists_the_shapes_whose_nearest_row_changes_its_choice(tmp_path: Path) -> None:
    before = load_logic(write(tmp_path / "before.yaml", GOOD))
    doc = copy.deepcopy(GOOD)  # a long-K row naming the small tile
    doc["table"].append({"m": 4096, "n": 4096, "k": 65536, "batch": 1, "solution": 0, "tflops": 650.0})
    after = load_logic(write(tmp_path / "after.yaml", doc))
    shapes, kinds = logic_moves.moved(before, after, [64, 4096], [64, 4096, 65536])
    # 4096²×65536 is the new row; 64×64×65536 is nearer it (ln 64 · √2 = 5.88) than the 4096³ row
    # (6.50) and the 64³ row (ln 1024 = 6.93); the rest keep their rows, or rows of the same config
    assert "4096x4096x65536" in shapes and "64x64x65536" in shapes
    assert "4096x4096x4096" not in shapes and "64x64x64" not in shapes
    assert sum(kinds.values()) == len(shapes) and set(kinds) == {("TmaConfig", "TileConfig")}
    assert logic_moves.moved(before, before, [64, 4096], [64, 4096, 65536]) == ([], {})
    # M apart from N: the sweep's M values only
    narrow, _ = logic_moves.moved(before, after, [64, 4096], [64, 4096, 65536], ms=[64])
    assert narrow == [s for s in shapes if s.startswith("64x")] and "64x64x65536" in narrow


def test_moved_weighs_a_wave_slack_file_for_the_device_multiprocessors(tmp_path: Path) -> None:
    plain = load_logic(write(tmp_path / "plain.yaml", {k: v for k, v in WAVES.items() if k != "wave_slack"}))
    weighing = load_logic(write(tmp_path / "waves.yaml", WAVES))
    # at 1536×4096×16384 the 128×128 row's whole waves win over the nearer 128×256 row (test_logic)
    shapes, _ = logic_moves.moved(plain, weighing, [1536, 4096], [16384])
    assert "1536x4096x16384" in shapes
    assert logic_moves.moved(plain, weighing, [1536, 4096], [16384], multiprocessors=0) == ([], {})


def test_sample_draws_reproducibly_in_sweep_order() -> None:
    shapes = [f"{m}x{m}x64" for m in range(1, 40)]
    drawn = logic_moves.sample(shapes, 5, seed=61)
    assert len(drawn) == 5 and drawn == sorted(drawn, key=shapes.index)
    assert drawn == logic_moves.sample(shapes, 5, seed=61) != logic_moves.sample(shapes, 5, seed=62)
    assert logic_moves.sample(shapes, None, seed=0) == shapes == logic_moves.sample(shapes, 99, seed=0)


def test_logic_rows_ab_times_each_file_through_calls(tmp_path: Path, monkeypatch) -> None:
    """The A/B script's plumbing on the interpreter: each file swapped in as the shipped logic (for
    the running arch, so each changes the pick), every call checked, ratios against the first."""
    import sys

    from benchmarks import logic_rows_ab
    from tessera._core.device import device_info
    from tessera.tuning import logic

    arch = device_info().arch
    small = copy.deepcopy({**GOOD, "arch": arch})
    small["solutions"][0].update(block_m=16, block_n=16)
    wide = copy.deepcopy(small)
    wide["solutions"][0].update(block_m=32, block_n=32)
    files = [f"small={write(tmp_path / 'a' / 'blas.gemm.fp32.yaml', small)}",
             f"wide={write(tmp_path / 'b' / 'blas.gemm.fp32.yaml', wide)}"]
    monkeypatch.setattr(logic_rows_ab, "DEVICE", "cpu")
    out = tmp_path / "ab.json"
    monkeypatch.setattr(sys, "argv", ["logic_rows_ab.py", "40x24x32", str(out), *files, "--rounds", "1"])
    shipped = logic.SHIPPED_LOGIC
    logic_rows_ab.main()
    assert logic.SHIPPED_LOGIC == shipped  # put back
    result = json.loads(out.read_text())
    assert {"device", "git", "versions", "command"} <= set(result) and result["dtype"] == "fp32"
    row = result["rows"][0]
    assert (row["m"], row["n"], row["k"]) == (40, 24, 32) and row["vs_base"]["small"] == 1.0
    assert "block_m=16" in row["picks"]["small"] and "block_m=32" in row["picks"]["wide"]
    assert set(row["tflops"]) == {"torch", "small", "wide"}


def test_dp_rows_swap_a_stream_k_row_only_for_a_close_data_parallel_candidate(tmp_path: Path) -> None:
    """The tuner's own stream-K margin (``Tuner.best``) applied to a finished tune's journal."""
    tile = {k: v for k, v in UPDATE["solutions"][1].items() if k != "id"}
    tma = {"kernel": "gemm_tma", "block_m": 128, "block_n": 256, "block_k": 64, "num_warps": 8,
           "num_stages": 4, "warp_specialize": False}
    streamk = {k: v for k, v in UPDATE["solutions"][0].items() if k != "id"}
    lines = [((4096, 4096, 4096, 1), streamk, 750.0, "ok"), ((4096, 4096, 4096, 1), tma, 720.0, "ok"),
             ((4096, 4096, 4096, 1), tile, 100.0, "ok"), ((2048, 2048, 2048, 1), streamk, 500.0, "ok"),
             ((2048, 2048, 2048, 1), tma, 460.0, "ok"), ((2048, 2048, 2048, 1), tile, 499.0, "incorrect"),
             ((1024, 1024, 1024, 1), tile, 300.0, "ok")]
    tuned = tmp_path / "blas.gemm.fp32.yaml"
    doc = copy.deepcopy(UPDATE)  # 4096³ on stream-K at 750, 1024³ on the tile at 300, 2048³ on stream-K
    doc["table"].append({"m": 2048, "n": 2048, "k": 2048, "batch": 1, "solution": 0, "tflops": 500.0})
    doc.update(max_distance=3.0, min_split_depth=512)  # selection rules the rewrite must keep
    write(tuned, doc)
    (tmp_path / "blas.gemm.fp32.journal.jsonl").write_text("".join(
        json.dumps({"config": json.dumps(c, sort_keys=True), "sizes": list(s), "status": st, "tflops": t})
        + "\n" for s, c, t, st in lines))

    def kernels(margin: float) -> dict[tuple[int, ...], tuple[str, float]]:
        out = write(tmp_path / f"out-{margin}.yaml", logic_dp_rows.rewrite(tuned, margin))
        rewritten = load_logic(out)
        return {row.sizes[:3]: (rewritten.solutions[row.solution].__class__.__name__, row.measured["tflops"])
                for row in rewritten.table}

    small = {(1024, 1024, 1024): ("TileConfig", 300.0), (2048, 2048, 2048): ("StreamKConfig", 500.0)}
    assert kernels(0.0) == {**small, (4096, 4096, 4096): ("StreamKConfig", 750.0)}  # the tuned file's picks
    # 4096³: stream-K only 1.04× the descriptor tile, within 5 %: the tile, at its own figure; 2048³:
    # 1.087× the tile (kept on stream-K; the failed candidate at 499 never counts)
    assert kernels(0.05) == {**small, (4096, 4096, 4096): ("TmaConfig", 720.0)}
    changed = logic_dp_rows.changed_rows(load_logic(tuned), load_logic(tmp_path / "out-0.05.yaml"))
    assert len(changed) == 1 and changed[0].startswith("(4096, 4096, 4096, 1): gemm_streamk")
    assert "-> gemm_tma 128x256x64" in changed[0] and changed[0].endswith("{'tflops': 720.0}")
    rewritten = load_logic(tmp_path / "out-0.05.yaml")
    assert (rewritten.max_distance, rewritten.min_split_depth) == (3.0, 512)


def test_round_bias_reads_each_rounds_ratio(tmp_path: Path, capsys) -> None:
    """benchmarks/round_bias.py: torch's time per round over its round 2, and the first file's over
    its A/A repeat (``again``) round by round, geometric means over the shapes."""
    from benchmarks import round_bias

    rows = [{"ms": {"torch": [0.96, 1.0, 1.02], "before": [2.0, 2.0, 2.2], "narrow": [1, 1, 1],
                    "again": [2.0, 1.6, 2.2]}},
            {"ms": {"torch": [1.5, 1.5, 1.5], "before": [4.0, 4.0, 4.0], "narrow": [1, 1, 1],
                    "again": [4.0, 5.0, 4.0]}}]
    path = tmp_path / "ab.json"
    path.write_text(json.dumps({"rows": rows}))
    assert round_bias.main([str(path)]) == 0
    out = capsys.readouterr().out
    assert "(2 shapes): torch / its round 2: 0.980 1.000 1.010; before / again: 1.000 1.000 1.000" in out
    assert round_bias.main([]) == 2
    other = tmp_path / "bench.json"  # another script's result (a stage's folder holds several kinds)
    other.write_text(json.dumps({"rows": [{"tflops": 1.0}]}))
    assert round_bias.main([str(other), str(path)]) == 0
    out = capsys.readouterr().out
    assert "bench.json: not a logic_rows_ab.py result" in out and "(2 shapes)" in out
