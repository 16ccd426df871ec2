"""Logic files: validation, nearest-size selection, lookup order and fall-through, unknown archs."""

from __future__ import annotations

import copy
import dataclasses
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import yaml

from reference import assert_gemm_close
from tessera import LogicFileError
from tessera._core.device import DeviceInfo, device_info
from tessera.blas import explain, gemm, space
from tessera.blas.kernels.gemm_tile import TileConfig
from tessera.blas.kernels.gemm_tma import TmaConfig
from tessera.cli import main
from tessera.tuning import load_logic, logic
from tessera.tuning.paths import SHIPPED_LOGIC

GOOD = {
    "schema": 1, "arch": "interpreter", "library": "blas", "op": "gemm", "problem": {"dtype": "fp32"},
    "runtime": {"triton": "3.9.0", "backend": "interpreter"},
    "solutions": [
        {"id": 0, "kernel": "gemm_tile", "block_m": 16, "block_n": 16, "block_k": 16, "group_m": 1,
         "num_warps": 2, "num_stages": 1},
        {"id": 1, "kernel": "gemm_tma", "block_m": 64, "block_n": 64, "block_k": 32, "num_warps": 4,
         "num_stages": 2, "warp_specialize": False},
    ],
    "table": [
        {"m": 64, "n": 64, "k": 64, "batch": 1, "solution": 0, "tflops": 1.5},
        {"m": 4096, "n": 4096, "k": 4096, "batch": 1, "solution": 1, "tflops": 700.0},
    ],
    "distance": "log_euclidean",
}


def write(path: Path, doc: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc) if not isinstance(doc, str) else doc)
    return path


def test_valid_file_loads_into_config_objects(tmp_path: Path) -> None:
    lf = load_logic(write(tmp_path / "x.yaml", GOOD))
    assert lf.solutions[0] == TileConfig(16, 16, 16, 1, 2, 1)
    assert isinstance(lf.solutions[1], TmaConfig) and lf.solutions[1].group_m == 8  # default kept
    assert [r.sizes for r in lf.table] == [(64, 64, 64, 1), (4096, 4096, 4096, 1)]
    assert lf.table[1].measured == {"tflops": 700.0}


def test_parsed_documents_are_kept_by_content_and_never_go_stale(tmp_path: Path) -> None:
    """A parsed logic file is kept as JSON named by its bytes' sha256, and read back by the next
    load; a file whose bytes change — even to the same size with its modification time put back —
    is parsed again. A cache that cannot be read or written only costs the parse."""
    import hashlib

    path = write(tmp_path / "x.yaml", GOOD)
    cache = Path(os.environ["TESSERA_HOME"]) / "cache" / "logic"
    kept = cache / f"{hashlib.sha256(path.read_bytes()).hexdigest()}.json"
    kept.unlink(missing_ok=True)
    first = load_logic(path)
    assert kept.is_file() and load_logic(path) == first
    times = path.stat()
    path.write_text(path.read_text().replace("tflops: 700.0", "tflops: 701.0"))  # same size
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
    assert load_logic(path).table[1].measured == {"tflops": 701.0}
    kept_again = cache / f"{hashlib.sha256(path.read_bytes()).hexdigest()}.json"
    kept_again.write_text("{not json")  # a damaged entry is parsed over
    assert load_logic(path).table[1].measured == {"tflops": 701.0}
    # integer keys: JSON would hold them as strings, so the document is not kept (and loads as YAML)
    odd = write(tmp_path / "odd.yaml", {**GOOD, "problem": {"dtype": "fp32", 3: "x"}})
    assert 3 in load_logic(odd).problem and 3 in load_logic(odd).problem  # twice: not read back as "3"
    assert not (cache / f"{hashlib.sha256(odd.read_bytes()).hexdigest()}.json").exists()


def test_a_logic_file_loads_where_the_parse_cache_cannot_be_written(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    monkeypatch.setenv("TESSERA_HOME", str(home))
    assert load_logic(write(tmp_path / "x.yaml", GOOD)).solutions[0] == TileConfig(16, 16, 16, 1, 2, 1)


def test_nearest_row_usable_filter_and_max_distance(tmp_path: Path) -> None:
    lf = load_logic(write(tmp_path / "x.yaml", GOOD))
    assert lf.nearest((3000, 3000, 3000, 1)).row.solution == 1
    assert lf.nearest((100, 80, 50, 1)).row.solution == 0
    only_tile = lf.nearest((3000, 3000, 3000, 1), usable=lambda c: not isinstance(c, TmaConfig))
    assert only_tile.row.solution == 0
    near = load_logic(write(tmp_path / "y.yaml", {**GOOD, "max_distance": 0.6}))
    assert near.nearest((3000, 3000, 3000, 1)) is not None  # √3·ln(4096/3000) ≈ 0.54
    assert near.nearest((512, 512, 512, 1)) is None  # √3·ln 8 ≈ 3.6 from either row


def _tile(block_m: int, block_n: int, sid: int) -> dict:
    return {"id": sid, "kernel": "gemm_tile", "block_m": block_m, "block_n": block_n, "block_k": 64,
            "group_m": 8, "num_warps": 8, "num_stages": 3}


# two rows of a long-K file: 128×256 tiles tuned at 1024×4096 (128 tiles: 0.97 of a wave of 132),
# 128×128 tiles at 1536² (144 tiles: 0.545 of two waves)
WAVES = {**GOOD, "problem": {"dtype": "bf16"}, "solutions": [_tile(128, 256, 0), _tile(128, 128, 1)],
         "table": [{"m": 1024, "n": 4096, "k": 16384, "batch": 1, "solution": 0, "tflops": 700.0},
                   {"m": 1536, "n": 1536, "k": 16384, "batch": 1, "solution": 1, "tflops": 620.0}],
         "wave_slack": 0.7}


def test_wave_efficiency_counts_whole_waves_and_tile_edges() -> None:
    wide, square = TileConfig(128, 256, 64, 8, 8, 3), TileConfig(128, 128, 64, 8, 8, 3)
    assert space.wave_efficiency(wide, (1024, 4096, 16384, 1), 132) == pytest.approx(128 / 132)
    assert space.wave_efficiency(wide, (1536, 4096, 16384, 1), 132) == pytest.approx(192 / 264)
    assert space.wave_efficiency(square, (1536, 4096, 16384, 1), 132) == pytest.approx(384 / 396)
    edges = 300 * 384 / (384 * 384)  # 3 × 3 tiles of 128², each of 2 batches
    assert space.wave_efficiency(square, (300, 384, 2048, 2), 132) == pytest.approx(edges * 18 / 132)
    split = space.SplitKConfig(64, 64, 64, 4, 4, 3)  # 4 slices of 16 tiles: 64 of 132
    assert space.wave_efficiency(split, (256, 256, 8192, 1), 132) == pytest.approx(64 / 132)
    streamk = space.StreamKConfig(128, 256, 64, 0, 8, 3, False)  # K shared over every SM: no tile count
    assert space.wave_efficiency(streamk, (1000, 1000, 8192, 1), 132) is None
    assert space.wave_efficiency(wide, (0, 4096, 64, 1), 132) == 1.0  # an empty problem: nothing idles


def test_wave_efficiency_does_not_judge_a_short_main_loop_or_a_skinny_product() -> None:
    wide = TileConfig(128, 256, 64, 8, 8, 3)  # judged from K = 2048 (space.WAVE_MIN_K)
    assert space.wave_efficiency(wide, (1024, 4096, 2048, 1), 132) == pytest.approx(128 / 132)
    assert space.wave_efficiency(wide, (1024, 4096, 2047, 1), 132) is None
    deep = TileConfig(128, 256, 128, 8, 8, 3)  # the same K for every tile, whatever its steps
    assert space.wave_efficiency(deep, (1024, 4096, 2047, 1), 132) is None
    split = space.SplitKConfig(64, 64, 64, 4, 4, 3)  # each of 4 slices loops over a quarter of K
    assert space.wave_efficiency(split, (256, 256, 8192, 1), 132) is not None
    assert space.wave_efficiency(split, (256, 256, 8191, 1), 132) is None
    assert space.wave_efficiency(wide, (255, 4096, 16384, 1), 132) is None  # skinny: bytes, not waves
    assert space.wave_efficiency(wide, (4096, 255, 16384, 1), 132) is None


def test_wave_slack_weighs_nearby_rows_by_their_waves(tmp_path: Path) -> None:
    lf = load_logic(write(tmp_path / "waves.yaml", WAVES))
    asked = (1536, 4096, 16384, 1)  # 0.41 from the 128×256 row, 0.98 from the 128×128 one
    # 128×256: 700 · (192/264) / (128/132) = 525 TFLOP/s expected; 128×128: 620 · 0.970 / 0.545 = 1103
    weighed = lf.nearest(asked, multiprocessors=132)
    assert weighed.row.solution == 1 and weighed.weighed == 2 and "weighed by waves" in weighed.describe()
    assert lf.nearest(asked).row.solution == 0  # no multiprocessor count: the nearest row
    assert lf.nearest((1024, 4096, 16384, 1), multiprocessors=132).weighed == 0  # a row at the size itself
    narrow = load_logic(write(tmp_path / "narrow.yaml", {**WAVES, "wave_slack": 0.5}))
    assert narrow.nearest(asked, multiprocessors=132).row.solution == 0  # 0.98 > 0.41 + 0.5: alone
    plain = load_logic(write(tmp_path / "plain.yaml", {k: v for k, v in WAVES.items() if k != "wave_slack"}))
    assert plain.nearest(asked, multiprocessors=132).row.solution == 0
    unusable = lf.nearest(asked, usable=lambda c: c.block_n == 256, multiprocessors=132)
    assert unusable.row.solution == 0 and unusable.weighed == 0


def test_wave_exponent_damps_the_waves_ratio(tmp_path: Path) -> None:
    """The ratios 0.75 (128×256) and 1.78 (128×128) raised to the exponent: 0.5 still favours the
    128×128 row (606 against 827 TFLOP/s), 0.1 the nearer 128×256 one (680 against 657)."""
    asked = (1536, 4096, 16384, 1)
    half = load_logic(write(tmp_path / "half.yaml", {**WAVES, "wave_exponent": 0.5}))
    assert half.wave_exponent == 0.5 and half.nearest(asked, multiprocessors=132).row.solution == 1
    tenth = load_logic(write(tmp_path / "tenth.yaml", {**WAVES, "wave_exponent": 0.1})).nearest(
        asked, multiprocessors=132)
    assert tenth.row.solution == 0 and tenth.weighed == 2
    assert load_logic(write(tmp_path / "one.yaml", {**WAVES, "wave_exponent": 1})).nearest(
        asked, multiprocessors=132).row.solution == 1  # 1: the ratio itself, as without the field


def test_wave_ratio_max_caps_how_much_a_row_speeds_up(tmp_path: Path) -> None:
    """WAVES with its 128×128 row at 400 TFLOP/s: scaled by 1.78 it scores 712 against the
    128×256 row's 525 and wins; capped at 1.2 it scores 480 and the nearer row wins; a cap above
    the ratio changes nothing. The cap comes before the exponent (1.2^0.5 · 400 = 438 < 606)."""
    asked = (1536, 4096, 16384, 1)
    slow = {**WAVES, "table": [WAVES["table"][0], {**WAVES["table"][1], "tflops": 400.0}]}
    assert load_logic(write(tmp_path / "uncapped.yaml", slow)).nearest(
        asked, multiprocessors=132).row.solution == 1
    capped = load_logic(write(tmp_path / "capped.yaml", {**slow, "wave_ratio_max": 1.2}))
    assert capped.wave_ratio_max == 1.2
    match = capped.nearest(asked, multiprocessors=132)
    assert match.row.solution == 0 and match.weighed == 2
    assert load_logic(write(tmp_path / "loose.yaml", {**slow, "wave_ratio_max": 2})).nearest(
        asked, multiprocessors=132).row.solution == 1
    damped = {**slow, "wave_ratio_max": 1.2, "wave_exponent": 0.5}
    assert load_logic(write(tmp_path / "damped.yaml", damped)).nearest(
        asked, multiprocessors=132).row.solution == 0


SPLIT = {**GOOD, "problem": {"dtype": "bf16"},
         "solutions": [{"id": 0, "kernel": "gemm_splitk", "block_m": 64, "block_n": 64, "block_k": 64,
                        "split_k": 4}, _tile(64, 128, 1)],
         "table": [{"m": 256, "n": 1024, "k": 4096, "batch": 1, "solution": 0, "tflops": 200.0},
                   {"m": 512, "n": 512, "k": 512, "batch": 1, "solution": 1, "tflops": 100.0}]}


def test_min_split_depth_keeps_split_rows_to_deep_slices(tmp_path: Path) -> None:
    """The split-K row (slices of 1024 at its own K = 4096) serves 128 × 1024 × 1024 without the
    limit (nearest); with 512 its slices there (256) are too shallow and the tile row serves; at
    K = 2048 (slices of 512) and at its own size it serves again. A limit above the row's own
    slice keeps it wherever its slices are as deep as its own: at its size and deeper K only."""
    plain = load_logic(write(tmp_path / "plain.yaml", SPLIT))
    assert plain.min_split_depth is None and plain.nearest((128, 1024, 1024, 1)).row.solution == 0
    deep = load_logic(write(tmp_path / "deep.yaml", {**SPLIT, "min_split_depth": 512}))
    assert deep.min_split_depth == 512
    assert deep.nearest((128, 1024, 1024, 1)).row.solution == 1
    assert deep.nearest((128, 1024, 2048, 1)).row.solution == 0
    assert deep.nearest((256, 1024, 4096, 1)).row.solution == 0
    deeper = load_logic(write(tmp_path / "deeper.yaml", {**SPLIT, "min_split_depth": 2048}))
    assert [deeper.nearest((256, 1024, k, 1)).row.solution for k in (2048, 4096, 8192)] == [1, 0, 0]
    alone = {**SPLIT, "table": SPLIT["table"][:1], "min_split_depth": 512}
    only = load_logic(write(tmp_path / "only.yaml", alone))
    assert only.nearest((128, 1024, 1024, 1)) is None  # nothing else within reach: the heuristic decides


def test_min_split_depth_steps_with_m(tmp_path: Path) -> None:
    """Steps by M: none below the first step's M, each step's depth from its M up. At K = 1024 the
    split row's slices are 256 deep: enough for the 256 asked from M = 8, not for the 512 from
    M = 128, so it serves M = 64 and 96 but not 128 or 160 (the tile row does); at K = 512 (slices
    of 128) it serves only below the first step (M = 4)."""
    steps = [{"m": 8, "depth": 256}, {"m": 128, "depth": 512}]
    stepped = load_logic(write(tmp_path / "steps.yaml", {**SPLIT, "min_split_depth": steps}))
    assert stepped.min_split_depth == ((8, 256.0), (128, 512.0))
    assert [stepped.nearest((m, 1024, 1024, 1)).row.solution for m in (64, 96, 128, 160)] == [0, 0, 1, 1]
    assert [stepped.nearest((m, 1024, 512, 1)).row.solution for m in (4, 8, 16)] == [0, 1, 1]
    assert stepped.nearest((256, 1024, 4096, 1)).row.solution == 0  # its own size, whatever the limit
    spec = logic.registered_ops()[("blas", "gemm")]  # written back (merge, tune) as the file had it
    written = logic.rule_document(spec, "min_split_depth", stepped.min_split_depth)
    assert yaml.safe_dump(written) == yaml.safe_dump(steps)  # 256, not 256.0
    assert logic.rule_document(spec, "min_split_depth", ((8, 256.5),)) == [{"m": 8, "depth": 256.5}]
    assert yaml.safe_dump(logic.rule_document(spec, "min_split_depth", 512.0)) == yaml.safe_dump(512)
    assert logic.rule_document(spec, "wave_slack", 1.0) == 1.0 and logic.rule_document(
        spec, "min_split_depth", 256.5) == 256.5


def test_min_split_depth_needs_an_op_that_splits(tmp_path: Path) -> None:
    doc = {"schema": 1, "arch": "interpreter", "library": "blas", "op": "symv", "problem": {"dtype": "bf16"},
           "runtime": {"triton": "3.9.0"}, "solutions": [{"id": 0, "kernel": "symv", "tile": 64}],
           "table": [{"n": 4096, "solution": 0, "gbs": 1.0}], "min_split_depth": 512}
    with pytest.raises(LogicFileError, match=r"field 'min_split_depth': blas\.symv declares no split"):
        load_logic(write(tmp_path / "symv.yaml", doc))


def test_rows_are_not_weighed_where_the_main_loop_is_short(tmp_path: Path) -> None:
    short = (1536, 4096, 1024, 1)  # K under 2048 here: the nearest row, as without the slack
    assert load_logic(write(tmp_path / "waves.yaml", WAVES)).nearest(short, multiprocessors=132).weighed == 0
    table = [{**row, "k": 1024} for row in WAVES["table"]]  # rows timed at a short K: neither weighed
    rows_short = load_logic(write(tmp_path / "short.yaml", {**WAVES, "table": table}))
    match = rows_short.nearest((1536, 4096, 16384, 1), multiprocessors=132)
    assert match.row.solution == 0 and match.weighed == 0


def test_a_stream_k_row_serves_only_its_own_size_where_waves_can_judge_a_row(tmp_path: Path) -> None:
    """Sixty-first session, an H100: at 28 shapes whose nearest row was stream-K, the nearest row
    waves can judge ran 1.01–3.1× faster (`tune-waves-h100-649cb96/`)."""
    streamk = {"id": 2, "kernel": "gemm_streamk", "block_m": 128, "block_n": 256, "block_k": 64,
               "programs": 0, "num_warps": 8, "num_stages": 3, "tma": False}
    fast = {"m": 1024, "n": 4096, "k": 24576, "batch": 1, "solution": 2, "tflops": 2000.0}
    solutions = [*WAVES["solutions"], streamk]
    rival = load_logic(write(tmp_path / "rival.yaml",
                             {**WAVES, "solutions": solutions, "table": [*WAVES["table"], fast]}))
    asked = (1536, 4096, 16384, 1)  # the stream-K row (0.57 away) has the top figure but no wave count
    assert rival.nearest(asked, multiprocessors=132).row.solution == 1
    table = [*WAVES["table"], {**fast, "m": 1536}]
    nearest = load_logic(write(tmp_path / "nearest.yaml", {**WAVES, "solutions": solutions, "table": table}))
    near = (1536, 4096, 20000, 1)  # stream-K 0.21 away; within 0.21 + 0.7 only the 128×256 row (0.45)
    passed_over = nearest.nearest(near, multiprocessors=132)
    assert passed_over.row.solution == 0 and passed_over.weighed == 1
    assert "the one row within reach whose waves tell" in passed_over.describe()
    assert nearest.nearest((1536, 4096, 24576, 1), multiprocessors=132).row.solution == 2  # its own size
    assert nearest.nearest(near).row.solution == 2  # no multiprocessor count: the nearest row
    short = [{**row, "k": 1024} for row in table]  # nothing waves can judge: the nearest, stream-K
    alone = load_logic(write(tmp_path / "short.yaml", {**WAVES, "solutions": solutions, "table": short}))
    assert alone.nearest((1536, 4096, 1100, 1), multiprocessors=132).row.solution == 2


def test_gemm_selection_gives_the_device_multiprocessors_to_a_file_weighing_waves(tmp_path: Path) -> None:
    _installed(tmp_path, {**WAVES, "problem": {"dtype": "bf16"}}, dtype="bf16")
    logic.reload()
    try:
        problem = space.GemmProblem(1536, 4096, 16384, 1, "bf16", False)
        here = device_info()
        sms = dataclasses.replace(here, multiprocessors=132)
        assert space.select(problem, sms).config == TileConfig(128, 128, 64, 8, 8, 3)
        assert "weighed by waves" in space.select(problem, sms).reason
        assert space.select(problem, dataclasses.replace(here, multiprocessors=None)).config == \
            TileConfig(128, 256, 64, 8, 8, 3)
    finally:
        logic.reload()


def test_only_an_op_with_an_efficiency_takes_wave_slack(tmp_path: Path) -> None:
    refused = re.escape("field 'wave_slack': blas.gemm_wq declares no efficiency")
    with pytest.raises(LogicFileError, match=refused):
        load_logic(write(tmp_path / "wq.yaml", {**WQ_WS, "wave_slack": 0.7}))


def _mutated(change) -> dict:
    doc = copy.deepcopy(GOOD)
    change(doc)
    return doc


BAD = [
    (lambda d: d.update(schema=2), "field 'schema': version 2 is not supported"),
    (lambda d: d.pop("arch"), "field 'arch': missing"),
    (lambda d: d.update(op="trsm"), "field 'op': blas.trsm is unknown"),
    (lambda d: d["solutions"][0].update(kernel="gemm_magic"), "field 'solutions[0].kernel'"),
    (lambda d: d["solutions"][0].pop("block_k"), "field 'solutions[0].block_k': missing"),
    (lambda d: d["solutions"][0].update(block_m=-4), "field 'solutions[0].block_m': must be a positive"),
    (lambda d: d["solutions"][1].update(warp_specialize=3),
     "field 'solutions[1].warp_specialize': must be a bool"),
    (lambda d: d["solutions"][0].update(bogus=1), "field 'solutions[0].bogus': not a parameter"),
    (lambda d: d["solutions"][1].update(epilogue_split=3),
     "field 'solutions[1]': epilogue_split must be one of (1, 2, 4) (actual: 3)"),
    (lambda d: d["solutions"][1].update(id=0), "field 'solutions[1].id': 0 is used twice"),
    (lambda d: d["table"][0].update(solution=9), "field 'table[0].solution': 9 is not a solution id"),
    (lambda d: d["table"][0].update(solution=[0]), "field 'table[0].solution': [0] is not a solution id"),
    (lambda d: d["table"][0].update(solution={0: 1}), "field 'table[0].solution': {0: 1} is not a solution"),
    (lambda d: d["table"][1].update(solution=True), "field 'table[1].solution': True is not a solution id"),
    (lambda d: d["table"][0].update(m="big"), "field 'table[0].m': must be a non-negative integer"),
    (lambda d: d.update(distance="manhattan"), "field 'distance': 'manhattan' is unknown"),
    (lambda d: d.update(max_distance=-1), "field 'max_distance'"),
    (lambda d: d.update(wave_slack=-0.5), "field 'wave_slack': must be a non-negative number"),
    (lambda d: d.update(max_distance=float("nan")), "field 'max_distance': must be a non-negative number"),
    (lambda d: d.update(wave_slack=float("nan")), "field 'wave_slack': must be a non-negative number"),
    (lambda d: d.update(wave_slack=0.7, wave_exponent=1.5),
     "field 'wave_exponent': must be a number in (0, 1]"),
    (lambda d: d.update(wave_slack=0.7, wave_exponent=True), "field 'wave_exponent': must be a number"),
    (lambda d: d.update(wave_exponent=0.8), "field 'wave_exponent': weighs rows only with a wave_slack"),
    (lambda d: d.update(wave_slack=0.7, wave_ratio_max=0.5),
     "field 'wave_ratio_max': must be a finite number of at least 1"),
    (lambda d: d.update(wave_slack=0.7, wave_ratio_max=float("inf")), "field 'wave_ratio_max': must be"),
    (lambda d: d.update(wave_slack=0.7, wave_ratio_max=float("nan")), "field 'wave_ratio_max': must be"),
    (lambda d: d.update(wave_slack=0.7, wave_ratio_max=True), "field 'wave_ratio_max': must be"),
    (lambda d: d.update(wave_ratio_max=2), "field 'wave_ratio_max': weighs rows only with a wave_slack"),
    (lambda d: d.update(max_distance=10**400), "field 'max_distance': must be a non-negative number"),
    (lambda d: d.update(wave_slack=0.7, wave_ratio_max=10**400), "field 'wave_ratio_max': must be"),
    (lambda d: d.update(min_split_depth=0.5), "field 'min_split_depth': must be a finite number of at least"),
    (lambda d: d.update(min_split_depth=float("inf")), "field 'min_split_depth': must be"),
    (lambda d: d.update(min_split_depth=float("nan")), "field 'min_split_depth': must be"),
    (lambda d: d.update(min_split_depth=True), "field 'min_split_depth': must be"),
    (lambda d: d.update(min_split_depth=[]), "field 'min_split_depth': an empty list of steps"),
    (lambda d: d.update(min_split_depth=[{"m": 1}]), "field 'min_split_depth[0]': must be a mapping of m"),
    (lambda d: d.update(min_split_depth=[{"n": 1, "depth": 256}]), "field 'min_split_depth[0]': must be"),
    (lambda d: d.update(min_split_depth=[512]), "field 'min_split_depth[0]': must be a mapping"),
    (lambda d: d.update(min_split_depth=[{"m": -1, "depth": 256}]),
     "field 'min_split_depth[0].m': must be a non-negative integer"),
    (lambda d: d.update(min_split_depth=[{"m": 1.5, "depth": 256}]), "field 'min_split_depth[0].m': must be"),
    (lambda d: d.update(min_split_depth=[{"m": 32, "depth": 512}, {"m": 32, "depth": 256}]),
     "field 'min_split_depth[1].m': must be above the step before's 32"),
    (lambda d: d.update(min_split_depth=[{"m": 1, "depth": 0.5}]),
     "field 'min_split_depth[0].depth': must be a finite number of at least 1"),
    (lambda d: d.update(min_split_depth=[{"m": 1, "depth": float("nan")}]),
     "field 'min_split_depth[0].depth': must be"),
    (lambda d: d["table"][0].update(tflops=10**400), "field 'table[0].tflops': must be a finite number"),
    (lambda d: d["table"][1].update(tflops=float("inf")), "field 'table[1].tflops': must be a finite number"),
    (lambda d: d["table"][0].update(tflops=float("nan")), "field 'table[0].tflops': must be a finite number"),
    (lambda d: d.update(solutions={"id": 0}), "field 'solutions': must be list"),
    (lambda d: d["problem"].update(layout="NX"), "field 'problem.layout': 'NX' is unknown"),
]


WQ_WS = {
    "schema": 1, "arch": "sm_90", "library": "blas", "op": "gemm_wq", "problem": {"dtype": "int8_bf16"},
    "runtime": {"triton": "3.6.0", "backend": "cuda"},
    "solutions": [{"id": 0, "kernel": "gemm_wq_ws", "num_stages": 6, "consumers": 3, "pdl": "exit"},
                  {"id": 1, "kernel": "gemm_wq_ws", "num_stages": 9, "consumers": 3}],
    "table": [{"m": 1, "n": 8192, "k": 8192, "solution": 0, "tflops": 6.9},
              {"m": 16, "n": 8192, "k": 8192, "solution": 1, "tflops": 108.0}],
    "distance": "log_euclidean",
}


def test_a_string_parameter_loads_and_a_wrong_one_names_its_field(tmp_path: Path) -> None:
    """gemm_wq_ws's PDL mode is a name (a tuned parameter since the best mode differs by GPU);
    omitted, it is the code width's measured mode."""
    from tessera.blas.kernels.gemm_wq_ws import WqWsConfig

    lf = load_logic(write(tmp_path / "wq.yaml", WQ_WS))
    assert lf.solutions == {0: WqWsConfig(6, 3, pdl="exit"), 1: WqWsConfig(9, 3)}
    for value, message in ((3, "field 'solutions[0].pdl': must be a string (actual: 3)"),
                           ("late", "field 'solutions[0]': gemm_wq_ws's pdl must be '' (the code width's")):
        doc = copy.deepcopy(WQ_WS)
        doc["solutions"][0]["pdl"] = value
        with pytest.raises(LogicFileError, match=re.escape(message)):
            load_logic(write(tmp_path / "bad.yaml", doc))
    # a file from before the stage rule (8 stages of 3 groups could fault) is refused, not run
    doc = copy.deepcopy(WQ_WS)
    doc["solutions"][1]["num_stages"] = 8
    with pytest.raises(LogicFileError, match=re.escape("field 'solutions[1]': gemm_wq_ws's stages must be a "
                                                       "multiple of its warp groups")):
        load_logic(write(tmp_path / "old.yaml", doc))


@pytest.mark.parametrize("change,message", BAD)
def test_each_defect_names_file_and_field(change, message: str, tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", _mutated(change))
    with pytest.raises(LogicFileError, match=re.escape(message)) as info:
        load_logic(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("text,message", [
    ("- just\n- a list\n", "must be a YAML mapping"),
    ("schema: [1,\n", "not valid YAML"),
    ("!!python/object/apply:os.system ['echo pwned']\n", "not valid YAML"),  # safe_load refuses
    # libyaml recursed through these until the process crashed (a segmentation fault)
    ("schema: 1\nx: " + "[" * 200_000 + "]" * 200_000 + "\n", "brackets nested 200000 deep"),
    ("schema: 1\nmax_distance: " + "9" * 5000 + "\n", "YAML that cannot be read into values"),
])
def test_not_a_logic_document(text: str, message: str, tmp_path: Path) -> None:
    with pytest.raises(LogicFileError, match=message):
        load_logic(write(tmp_path / "bad.yaml", text))


def test_a_file_too_large_is_refused_unparsed(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_bytes(b"schema: 1\n" + b"#" * logic.MAX_FILE_BYTES)
    with pytest.raises(LogicFileError, match="over the 16777216 a logic file may hold"):
        load_logic(path)


def _installed(tmp_path: Path, doc: dict, dtype: str = "fp32") -> Path:
    """Write ``doc``, retargeted to the running arch, where the installed pack's logic lives
    (conftest points TESSERA_HOME at a fresh directory for every test)."""
    arch = device_info().arch
    home = Path(os.environ["TESSERA_HOME"])
    return write(home / "current" / "logic" / arch / f"blas.gemm.{dtype}.yaml", {**doc, "arch": arch})


@pytest.fixture(params=[False, True], ids=["no-shipped-logic", "shipped-logic"])
def shipped(request: pytest.FixtureRequest, tmp_path: Path,
            monkeypatch: pytest.MonkeyPatch) -> Iterator[Path | None]:
    """The wheel's logic folder replaced by an empty one or one holding an fp32 GEMM file for the
    running arch (as sm_90 ships), so both fall-through paths run on every machine. Yields that
    file's path, or None."""
    monkeypatch.setattr(logic, "SHIPPED_LOGIC", tmp_path / "shipped")
    path = None
    if request.param:
        arch = device_info().arch
        doc = copy.deepcopy({**GOOD, "arch": arch})
        doc["solutions"][0].update(block_m=32, block_n=32)
        path = write(tmp_path / "shipped" / arch / "blas.gemm.fp32.yaml", doc)
    logic.reload()
    yield path
    monkeypatch.undo()
    logic.reload()  # no selection cached from the stand-in folder outlives the test


def test_gemm_uses_installed_logic_then_falls_through(tmp_path: Path, device: str,
                                                      shipped: Path | None) -> None:
    a, b = torch.randn(70, 50, device=device), torch.randn(50, 40, device=device)
    arch = device_info().arch
    before = explain(a, b)
    steps = before.reason.split("; ")  # pack, then the wheel's file or (none) the heuristic's reason
    assert steps[0] == f"no installed pack logic for {arch}/blas.gemm.fp32"
    if shipped is not None:
        assert len(steps) == 2 and str(shipped) in steps[1]
        assert before.config == TileConfig(32, 32, 16, 1, 2, 1)
    else:
        assert len(steps) == 3 and "no shipped logic" in steps[1] and steps[2]
    path = _installed(tmp_path, GOOD)
    logic.reload()
    choice = explain(a, b)
    assert choice.config == TileConfig(16, 16, 16, 1, 2, 1)
    assert str(path) in choice.reason and "row 64x64x64x1" in choice.reason
    assert_gemm_close(gemm(a, b), a, b)
    with logic.ignored():  # the untuned baseline: every logic file passed over
        untuned = explain(a, b)
        assert_gemm_close(gemm(a, b), a, b)
    assert "logic files ignored" in untuned.reason and str(path) not in untuned.reason
    no_tma = space.GemmProblem(70, 40, 50, 1, "fp32", False)  # rows of 50 fp32 are not 16-byte multiples
    assert untuned.config == space.heuristic(no_tma, device_info()).config
    assert explain(a, b) == choice  # and found again after the block


def test_tma_rows_are_skipped_where_the_layout_does_not_allow_them(tmp_path: Path, device: str) -> None:
    _installed(tmp_path, _mutated(lambda d: d["table"].pop(0)))  # only the TMA row remains
    logic.reload()
    a = torch.randn(3, 40, 30, device=device)  # batched: the TMA family cannot run it
    choice = explain(a, torch.randn(30, 20, device=device))
    assert "no usable row" in choice.reason and isinstance(choice.config, TileConfig)


def test_broken_installed_logic_warns_and_falls_through(tmp_path: Path, device: str,
                                                       shipped: Path | None) -> None:
    _installed(tmp_path, _mutated(lambda d: d.update(schema=7)))
    logic.reload()
    a, b = torch.randn(20, 10, device=device), torch.randn(10, 30, device=device)
    with pytest.warns(UserWarning, match="ignoring installed pack logic"):
        choice = explain(a, b)
    assert "installed pack logic" in choice.reason and "is invalid" in choice.reason
    assert (shipped is not None) == (str(shipped) in choice.reason)
    assert_gemm_close(gemm(a, b), a, b)


def test_logic_in_the_wrong_place_is_refused(tmp_path: Path, device: str) -> None:
    _installed(tmp_path, GOOD, dtype="fp16")  # content says fp32
    logic.reload()
    a = torch.randn(4, 4, device=device).half()
    with pytest.warns(UserWarning, match=f"its location for {device_info().arch}/blas.gemm.fp16"):
        explain(a, a)


NT_TILE = TileConfig(16, 32, 16, 1, 2, 1)


def test_layout_logic_refines_its_dtype_file(tmp_path: Path, device: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A layout file (here NT: B column-major) takes calls in its layout within its max_distance;
    other layouts, and sizes beyond it, keep the dtype's file; a pack's dtype file is not overridden
    by the wheel's layout file, and the pack's own layout file comes first."""
    arch = device_info().arch
    monkeypatch.setattr(logic, "SHIPPED_LOGIC", tmp_path / "shipped")
    shipped = tmp_path / "shipped" / arch
    general = write(shipped / "blas.gemm.fp32.yaml", {**GOOD, "arch": arch})
    nt = _mutated(lambda d: (d.update(arch=arch, max_distance=1.0), d["problem"].update(layout="NT"),
                             d["solutions"][0].update(block_n=32)))
    layout_file = write(shipped / "blas.gemm.fp32.NT.yaml", nt)
    logic.reload()
    try:
        a, w = torch.randn(70, 50, device=device), torch.randn(40, 50, device=device)
        choice = explain(a, w.t())  # x @ W.t(): B column-major
        assert choice.config == NT_TILE and str(layout_file) in choice.reason
        assert_gemm_close(gemm(a, w.t()), a, w.t())
        row_major = explain(a, w.t().contiguous())
        assert row_major.config == TileConfig(16, 16, 16, 1, 2, 1) and str(general) in row_major.reason
        far = explain(torch.randn(900, 8, device=device), torch.randn(700, 8, device=device).t())
        assert str(layout_file) + ": no usable row within its max_distance" in far.reason
        assert str(general) in far.reason  # beyond the layout file's rows: the dtype's file decides
        pack_general = _installed(tmp_path, GOOD)
        logic.reload()
        assert str(pack_general) in explain(a, w.t()).reason  # the pack's dtype file before the wheel's
        pack_nt = write(pack_general.with_name("blas.gemm.fp32.NT.yaml"), nt)
        logic.reload()
        assert str(pack_nt) in explain(a, w.t()).reason
        write(pack_nt, {**GOOD, "arch": arch})  # dtype-file content under the layout's name
        logic.reload()
        with pytest.warns(UserWarning, match=f"its location for {arch}/blas.gemm.fp32.NT"):
            assert str(pack_general) in explain(a, w.t()).reason
    finally:
        monkeypatch.undo()
        logic.reload()


def _device(arch: str, backend: str, shared: int | None) -> DeviceInfo:
    return DeviceInfo(arch=arch, backend=backend, name="fake", multiprocessors=None, warp_size=64,
                      shared_memory_per_block=shared, peak_tflops={}, memory_bandwidth_tbs=None)


@pytest.mark.parametrize("dtype", ["fp16", "bf16", "fp32", "fp64"])
def test_unknown_arch_never_crashes(dtype: str) -> None:
    problem = space.GemmProblem(8192, 8192, 8192, 1, dtype, False)
    unknown = space.select(problem, _device("gfx9999", "hip", None))
    assert unknown.config == space.SAFE_DEFAULT and "no properties known for hip gfx9999" in unknown.reason
    small = space.select(problem, _device("gfx9999", "hip", 65536))
    assert isinstance(small.config, TileConfig)
    assert space._shared_memory_bytes(small.config, dtype) <= 65536


@pytest.mark.parametrize("limit", [8192, 16384, 65536, 101376, 232448])
def test_fit_to_shared_memory(limit: int) -> None:
    for config in space.TILE_SPACE[::7]:
        for dtype in ("bf16", "fp64"):
            fitted = space._fit_to_shared_memory(config, dtype, limit)
            assert space._shared_memory_bytes(fitted, dtype) <= limit
            assert fitted.block_m <= config.block_m and fitted.block_k <= config.block_k


def test_cli_validate_and_show(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    good = write(tmp_path / "good.yaml", GOOD)
    bad = write(tmp_path / "bad.yaml", _mutated(lambda d: d.pop("table")))
    assert main(["logic", "validate", str(good)]) == 0
    assert main(["logic", "validate", str(good), str(bad)]) == 1
    captured = capsys.readouterr()
    assert "ok: " in captured.out and "field 'table': missing" in captured.err
    assert main(["logic", "show", str(good)]) == 0
    out = capsys.readouterr().out
    assert "gemm_tile 16x16x16 g1 w2 s1" in out and "4096x4096x4096x1" in out
    nt = write(tmp_path / "blas.gemm.fp32.NT.yaml", _mutated(lambda d: d["problem"].update(layout="NT")))
    assert main(["logic", "validate", str(nt)]) == 0 and main(["logic", "show", str(nt)]) == 0
    out = capsys.readouterr().out
    assert "blas.gemm fp32 NT, 2 solutions" in out and "'layout': 'NT'" in out
    spare = write(tmp_path / "spare.yaml", _mutated(lambda d: d["solutions"].append(
        {**d["solutions"][0], "id": 2, "block_m": 32})))
    assert load_logic(spare).unnamed_solutions == [2] and load_logic(good).unnamed_solutions == []
    assert main(["logic", "validate", str(spare)]) == 0  # valid, but said
    assert "no row names solution 2: a pack would compile it" in capsys.readouterr().out


# a partial re-tune of GOOD: 4096³ gets a new solution, 1024³ is new, 64³ is not re-tuned; its
# stream-K solution equals nothing in GOOD, its tile solution equals GOOD's solution 0
UPDATE = {**GOOD,
          "solutions": [{"id": 0, "kernel": "gemm_streamk", "block_m": 128, "block_n": 128, "block_k": 64},
                        {"id": 1, "kernel": "gemm_tile", "block_m": 16, "block_n": 16, "block_k": 16,
                         "group_m": 1, "num_warps": 2, "num_stages": 1}],
          "table": [{"m": 4096, "n": 4096, "k": 4096, "batch": 1, "solution": 0, "tflops": 750.0},
                    {"m": 1024, "n": 1024, "k": 1024, "batch": 1, "solution": 1, "tflops": 300.0}]}


def test_merge_replaces_and_adds_rows(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    base = write(tmp_path / "base.yaml", GOOD)
    update = write(tmp_path / "update.yaml", UPDATE)
    out = tmp_path / "merged.yaml"
    assert main(["logic", "merge", str(base), str(update), "-o", str(out)]) == 0
    assert "3 rows (1 replaced and 1 added" in capsys.readouterr().out
    merged = load_logic(out)
    by_size = {row.sizes: (merged.solutions[row.solution], row.measured) for row in merged.table}
    tile = TileConfig(16, 16, 16, 1, 2, 1)
    assert by_size == {(64, 64, 64, 1): (tile, {"tflops": 1.5}),
                       (1024, 1024, 1024, 1): (tile, {"tflops": 300.0}),
                       (4096, 4096, 4096, 1): (load_logic(update).solutions[0], {"tflops": 750.0})}
    assert len(merged.solutions) == 2  # GOOD's TMA solution is no longer used; the tile one is shared
    assert (merged.arch, merged.problem, merged.runtime) == ("interpreter", {"dtype": "fp32"},
                                                             GOOD["runtime"])
    again = write(tmp_path / "again.yaml", GOOD)
    assert load_logic(base).table == load_logic(again).table  # the inputs are untouched


def test_merge_marks_rows_measured_on_another_gpu_of_the_arch(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture) -> None:
    """An update measured on another GPU of the arch (same Triton and backend) merges, each of its
    rows naming that GPU — kept through a later merge, shown by ``logic show`` — while the file's
    runtime stays its own; rows of the file's own GPU name none, and a bad name is refused."""
    h200 = {**GOOD, "runtime": {**GOOD["runtime"], "device": "NVIDIA H200"}}
    h100 = {**UPDATE, "runtime": {**GOOD["runtime"], "device": "NVIDIA H100 80GB HBM3"}}
    base, update = write(tmp_path / "base.yaml", h200), write(tmp_path / "h100.yaml", h100)
    out = tmp_path / "m.yaml"
    assert main(["logic", "merge", str(base), str(update), "-o", str(out)]) == 0
    merged = load_logic(out)
    assert merged.runtime == h200["runtime"]
    assert {row.sizes: row.device for row in merged.table} == {
        (64, 64, 64, 1): None, (1024, 1024, 1024, 1): "NVIDIA H100 80GB HBM3",
        (4096, 4096, 4096, 1): "NVIDIA H100 80GB HBM3"}
    own = write(tmp_path / "own.yaml", {**h200, "table": [{"m": 4096, "n": 4096, "k": 4096, "batch": 1,
                                                           "solution": 0, "tflops": 710.0}]})
    assert main(["logic", "merge", str(out), str(own), "-o", str(out)]) == 0  # re-measured on the H200
    devices = {row.sizes: row.device for row in load_logic(out).table}
    assert devices[(1024, 1024, 1024, 1)] == "NVIDIA H100 80GB HBM3"
    assert devices[(4096, 4096, 4096, 1)] is None
    capsys.readouterr()
    assert main(["logic", "show", str(out)]) == 0
    assert "tflops 300  (on NVIDIA H100 80GB HBM3)" in capsys.readouterr().out
    bad = write(tmp_path / "bad.yaml", {**h200, "table": [{**GOOD["table"][0], "device": 3}]})
    with pytest.raises(LogicFileError, match=r"table\[0\]\.device"):
        load_logic(bad)


@pytest.mark.parametrize("field, value", [("problem", {"dtype": "bf16"}), ("arch", "sm_90"),
                                          ("runtime", {"triton": "3.6.0", "backend": "cuda"}),
                                          ("max_distance", 0.5), ("wave_slack", 0.7)])
def test_merge_refuses_files_of_different_problems(field: str, value: object, tmp_path: Path,
                                                   capsys: pytest.CaptureFixture) -> None:
    base = write(tmp_path / "base.yaml", GOOD)
    before = base.read_text()
    update = write(tmp_path / "update.yaml", {**UPDATE, field: value})
    assert main(["logic", "merge", str(base), str(update), "-o", str(base)]) == 2  # a refused input
    assert f"their {field} differ" in capsys.readouterr().err
    assert base.read_text() == before  # the output (here BASE itself) is not touched


def test_merge_into_a_file_with_a_selection_rule_names_the_tune_flag(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture) -> None:
    """A fresh tune's file has no wave_slack: the refusal says which flag makes it mergeable."""
    base = write(tmp_path / "base.yaml", {**GOOD, "wave_slack": 0.7})
    update = write(tmp_path / "update.yaml", UPDATE)
    assert main(["logic", "merge", str(base), str(update), "-o", str(tmp_path / "out.yaml")]) == 2
    assert "tune the update with --wave-slack 0.7" in capsys.readouterr().err
    assert not (tmp_path / "out.yaml").exists()


@pytest.mark.parametrize(("rule", "value", "shown"), [("wave_exponent", 0.8, "their ratio to the power 0.8"),
                                                      ("wave_ratio_max", 2.0, "their ratio capped at 2.0"),
                                                      ("min_split_depth", 512, "is at least 512 deep")])
def test_merge_requires_the_same_wave_rule_and_keeps_it(tmp_path: Path, capsys: pytest.CaptureFixture,
                                                        rule: str, value: float, shown: str) -> None:
    base = write(tmp_path / "base.yaml", {**GOOD, "wave_slack": 0.7, rule: value})
    plain = write(tmp_path / "plain.yaml", {**UPDATE, "wave_slack": 0.7})
    assert main(["logic", "merge", str(base), str(plain), "-o", str(tmp_path / "out.yaml")]) == 2
    assert f"tune the update with --{rule.replace('_', '-')} {value}" in capsys.readouterr().err
    same = write(tmp_path / "same.yaml", {**UPDATE, "wave_slack": 0.7, rule: value})
    assert main(["logic", "merge", str(base), str(same), "-o", str(tmp_path / "out.yaml")]) == 0
    assert getattr(load_logic(tmp_path / "out.yaml"), rule) == value
    assert main(["logic", "show", str(tmp_path / "out.yaml")]) == 0
    assert shown in capsys.readouterr().out


def test_merge_keeps_split_depth_steps_and_names_the_flag_for_them(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture) -> None:
    steps = [{"m": 1, "depth": 256}, {"m": 32, "depth": 512}]
    base = write(tmp_path / "base.yaml", {**GOOD, "min_split_depth": steps})
    plain = write(tmp_path / "plain.yaml", UPDATE)
    assert main(["logic", "merge", str(base), str(plain), "-o", str(tmp_path / "out.yaml")]) == 2
    assert "tune the update with --min-split-depth 1:256,32:512 " in capsys.readouterr().err
    same = write(tmp_path / "same.yaml", {**UPDATE, "min_split_depth": steps})
    assert main(["logic", "merge", str(base), str(same), "-o", str(tmp_path / "out.yaml")]) == 0
    assert load_logic(tmp_path / "out.yaml").min_split_depth == ((1, 256.0), (32, 512.0))
    assert main(["logic", "show", str(tmp_path / "out.yaml")]) == 0
    assert "a slice is at least 256 deep from m 1, 512 from m 32" in capsys.readouterr().out


def _space_configs() -> list[object]:
    """Every configuration the tuners and packs may write (the declared tuning spaces)."""
    from tessera.blas import tune as blas_tune
    from tessera.rand import space as rand_space

    configs: list[object] = []
    for name in dir(space):
        if name.endswith("_SPACE") and isinstance(getattr(space, name), tuple):
            configs += getattr(space, name)
    for spaces in (blas_tune.SPACES, rand_space.SPACES):
        for configs_ in spaces.values():
            configs += configs_
    return list(dict.fromkeys(configs))


def test_every_tuning_space_config_survives_a_logic_file(tmp_path: Path) -> None:
    """What a tuner writes, the loader takes back unchanged: stream-K's ``programs: 0`` (one per
    SM) was once refused as "not a positive integer", which silently voided a tuned tf32 file."""
    configs = _space_configs()
    covered: set[object] = set()
    for (library, op), spec in logic.registered_ops().items():
        mine = [c for c in configs if type(c) in spec.families.values()]
        if not mine:
            continue
        rows = [({key: 64 + i for key in spec.size_keys}, c) for i, c in enumerate(mine)]
        doc = logic.heuristic_document("sm_90", "cuda", library, op, "fp32", rows)
        loaded = load_logic(write(tmp_path / f"{library}.{op}.fp32.yaml", doc))
        assert [loaded.solutions[r.solution] for r in loaded.table] == mine
        covered.update(mine)
    assert covered == set(configs) and len(covered) > 100  # every space's family belongs to an op


@pytest.mark.parametrize("path", sorted(SHIPPED_LOGIC.glob("*/*.yaml")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_solution_of_a_shipped_file_is_chosen_by_a_row(path: Path) -> None:
    """A solution no row names would cost every pack a compiled kernel that no call runs."""
    assert load_logic(path).unnamed_solutions == []
