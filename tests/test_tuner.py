"""The tuner: correctness before timing, durable journal, resume, locking, logic output, CLI."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

import pytest
import yaml

from tessera import InvalidArgumentError
from tessera.blas.kernels.gemm_tile import TileConfig
from tessera.cli import main
from tessera.cli.main import _split_depth
from tessera.tuning import load_logic, logic
from tessera.tuning.tuner import TunableOp, Tuner, parse_sizes

CONFIGS = [TileConfig(16, 16, 16, 1, 2, 1), TileConfig(32, 32, 16, 4, 4, 1), TileConfig(16, 32, 32, 8, 4, 2),
           TileConfig(64, 64, 32, 8, 4, 3)]
PROBLEMS = [(64, 64, 64, 1), (128, 32, 256, 1), (32, 32, 32, 4)]


def fake_op(interrupt_after: int | None = None, calls: list[int] | None = None) -> TunableOp:
    """Deterministic figures; config 3 is 'incorrect', config 1 fails on the batched problem."""
    calls = calls if calls is not None else []

    def check(problem: tuple[int, ...], config: TileConfig) -> str | None:
        return "error exceeds the accuracy bound by x1e6" if config == CONFIGS[3] else None

    def measure(problem: tuple[int, ...], config: TileConfig) -> float:
        calls.append(1)
        if interrupt_after is not None and len(calls) > interrupt_after:
            raise KeyboardInterrupt  # a kill in the middle of a run
        if config == CONFIGS[1] and problem[3] > 1:
            raise RuntimeError("out of resources")
        return float((sum(problem) * (CONFIGS.index(config) + 3)) % 17 + 1)

    return TunableOp("blas", "gemm", "interpreter", "fp32", PROBLEMS, lambda p: CONFIGS, check, measure)


def test_logic_holds_the_best_correct_candidate(tmp_path: Path) -> None:
    tuner = Tuner(fake_op(), tmp_path, progress=False)
    lf = load_logic(tuner.run())
    assert lf.origin == "tuned" and [row.sizes for row in lf.table] == sorted(PROBLEMS)
    statuses = {(tuple(e["sizes"]), e["status"]) for e in tuner.journal()}
    assert ((32, 32, 32, 4), "failed") in statuses and ((64, 64, 64, 1), "incorrect") in statuses
    for row in lf.table:
        assert lf.solutions[row.solution] != CONFIGS[3]  # never an incorrect candidate
        figures = [float((sum(row.sizes) * (i + 3)) % 17 + 1) for i in range(3)
                   if not (i == 1 and row.sizes[3] > 1)]
        assert row.measured["tflops"] == max(figures)


def test_a_problem_without_a_correct_candidate_is_reported_with_a_reason(tmp_path: Path) -> None:
    """Every candidate of the batched problem fails or is wrong: unsolved() names it, how many were
    tried and the first reason (the CLI prints it; before, only "no correct candidate")."""
    base = fake_op()

    def check(problem: tuple[int, ...], config: TileConfig) -> str | None:
        return "wrong" if problem[3] > 1 and config != CONFIGS[1] else base.check(problem, config)

    tuner = Tuner(dataclasses.replace(base, check=check), tmp_path, progress=False)
    tuner.run()
    first_reason = "wrong"  # CONFIGS[0] comes first and is wrong there
    assert tuner.unsolved() == {(32, 32, 32, 4): (len(CONFIGS), first_reason)}


def test_killed_and_resumed_equals_uninterrupted(tmp_path: Path) -> None:
    whole_calls: list[int] = []
    whole = Tuner(fake_op(calls=whole_calls), tmp_path / "whole", progress=False).run().read_text()
    with pytest.raises(KeyboardInterrupt):
        Tuner(fake_op(interrupt_after=4), tmp_path / "cut", progress=False).run()
    journal = tmp_path / "cut" / "interpreter" / "blas.gemm.fp32.journal.jsonl"
    with open(journal, "a") as f:
        f.write('{"sizes": [128, 32, 2')  # a line cut short by the kill
    calls: list[int] = []
    resumed = Tuner(fake_op(calls=calls), tmp_path / "cut", resume=True, progress=False).run()
    assert resumed.read_text() == whole
    assert len(calls) == len(whole_calls) - 4, "resume must not repeat journaled timings"


def test_journal_lines_that_are_no_results_are_timed_again(tmp_path: Path) -> None:
    """Lines of the wrong shape (edited, or another tool's) are ignored as a cut line is: the
    resumed run times those candidates and writes what an uninterrupted one writes."""
    whole = Tuner(fake_op(), tmp_path / "whole", progress=False).run().read_text()
    with pytest.raises(KeyboardInterrupt):
        Tuner(fake_op(interrupt_after=4), tmp_path / "cut", progress=False).run()
    journal = tmp_path / "cut" / "interpreter" / "blas.gemm.fp32.journal.jsonl"
    real = json.loads(journal.read_text().splitlines()[0])
    junk = [[1], 5, "text", {"sizes": "64x64", "config": real["config"]},
            {"sizes": real["sizes"], "config": 7}, {"sizes": [-1, 2], "config": real["config"]},
            {**real, "config": "[1, 2]"}, {**real, "config": "{not json"},
            {**real, "status": "ok", "tflops": "fast"}, {**real, "status": "ok", "tflops": True},
            {**real, "status": "ok", "tflops": float("inf")}, {**real, "status": "ok", "tflops": 10**400}]
    with open(journal, "a") as f:
        f.write("".join(json.dumps(entry) + "\n" for entry in junk) + "[" * 100_000 + "\n")
    assert Tuner(fake_op(), tmp_path / "cut", resume=True, progress=False).run().read_text() == whole


def test_existing_journal_needs_resume(tmp_path: Path) -> None:
    Tuner(fake_op(), tmp_path, progress=False).run()
    with pytest.raises(InvalidArgumentError, match="pass --resume"):
        Tuner(fake_op(), tmp_path, progress=False)


def test_budget_stops_and_resume_finishes(tmp_path: Path) -> None:
    Tuner(fake_op(), tmp_path, budget_s=0.0, progress=False).run()
    finished = Tuner(fake_op(), tmp_path, resume=True, progress=False).run()
    assert len(load_logic(finished).table) == len(PROBLEMS)


def test_max_distance_bounds_where_the_logic_applies(tmp_path: Path) -> None:
    """--max-distance reaches the logic file: farther sizes fall through to the heuristic (a file
    tuned at decode sizes must not choose for prefill), nearer ones take the nearest row."""
    lf = load_logic(Tuner(fake_op(), tmp_path, progress=False, max_distance=1.0).run())
    assert lf.max_distance == 1.0
    assert lf.nearest((64, 64, 64, 1)) is not None and lf.nearest((100, 64, 64, 1)) is not None
    assert lf.nearest((4096, 64, 64, 1)) is None  # ln(64) = 4.2 from the nearest row
    unbounded = load_logic(Tuner(fake_op(), tmp_path / "free", progress=False).run())
    assert unbounded.max_distance is None and unbounded.nearest((4096, 64, 64, 1)) is not None
    for bad in ("-1", "nan", "far"):
        with pytest.raises(SystemExit):
            main(["tune", "gemm", "--dtype", "fp32", "--max-distance", bad, "--out", str(tmp_path / "x")])


def test_wave_slack_reaches_the_logic_file_of_a_float_gemm_tune_only(tmp_path: Path) -> None:
    assert load_logic(Tuner(fake_op(), tmp_path, progress=False, wave_slack=0.7).run()).wave_slack == 0.7
    assert load_logic(Tuner(fake_op(), tmp_path / "plain", progress=False).run()).wave_slack is None
    with pytest.raises(SystemExit):
        main(["tune", "gemm", "--dtype", "fp32", "--wave-slack", "-1", "--out", str(tmp_path / "x")])
    assert main(["tune", "gemm", "--dtype", "int8", "--wave-slack", "0.7", "--sizes", "32x32x32",
                 "--out", str(tmp_path / "q")]) == 2  # refused before any tuning: no file written
    assert not (tmp_path / "q").exists() or not any((tmp_path / "q").rglob("*.yaml"))


def test_min_split_depth_reaches_the_logic_file_of_a_float_gemm_tune_only(
        tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    tuned = Tuner(fake_op(), tmp_path, progress=False, min_split_depth=512).run()
    assert load_logic(tuned).min_split_depth == 512
    steps = _split_depth("1:256,32:512")
    assert steps == ((1, 256.0), (32, 512.0)) and _split_depth("512") == 512.0
    stepped = Tuner(fake_op(), tmp_path / "steps", progress=False, min_split_depth=steps).run()
    assert load_logic(stepped).min_split_depth == steps
    assert main(["tune", "gemm", "--dtype", "int8", "--min-split-depth", "512", "--sizes", "32x32x32",
                 "--out", str(tmp_path / "q")]) == 2  # refused before any tuning: no file written
    assert "--min-split-depth is for float GEMM" in capsys.readouterr().err
    for text in ("0.5", "inf", "nan", "-2", "1:256,1:512", "32:512,1:256", "x:256", "1:0.5", "1:256,"):
        with pytest.raises(SystemExit):
            main(["tune", "gemm", "--dtype", "fp32", "--min-split-depth", text, "--out", str(tmp_path / "x")])
    assert not any(path.rglob("*.yaml") for path in (tmp_path / "q", tmp_path / "x") if path.exists())


@pytest.mark.parametrize(("rule", "value", "bad"), [("wave_exponent", 0.8, ("0", "1.5", "nan")),
                                                    ("wave_ratio_max", 2.0, ("0.5", "inf", "nan", "-2"))])
def test_a_wave_rule_reaches_the_logic_file_with_a_wave_slack_only(
        tmp_path: Path, capsys: pytest.CaptureFixture, rule: str, value: float, bad: tuple[str, ...]) -> None:
    tuned = Tuner(fake_op(), tmp_path, progress=False, wave_slack=0.7, **{rule: value}).run()
    assert getattr(load_logic(tuned), rule) == value
    flag = "--" + rule.replace("_", "-")
    assert main(["tune", "gemm", "--dtype", "fp32", flag, str(value), "--out", str(tmp_path / "x")]) == 2
    assert f"give --wave-slack too, or leave {flag} out" in capsys.readouterr().err
    for text in bad:
        with pytest.raises(SystemExit):
            main(["tune", "gemm", "--dtype", "fp32", "--wave-slack", "0.7", flag, text,
                  "--out", str(tmp_path / "x")])
    assert not (tmp_path / "x").exists() or not any((tmp_path / "x").rglob("*.yaml"))


def test_a_local_configuration_takes_a_row_only_beyond_the_margin(tmp_path: Path) -> None:
    """A stream-K-like configuration (``TunableOp.local``) 4 % ahead gives its row to the best
    other within a 5 % margin, one 10 % ahead keeps it; without the margin the fastest wins."""
    figures = {CONFIGS[0]: 100.0, CONFIGS[1]: 96.0, CONFIGS[2]: 90.0}  # config 0: local

    def measure(problem: tuple[int, ...], config: TileConfig) -> float:
        return figures[config] * (1.06 if problem == (128, 32, 256, 1) and config == CONFIGS[0] else 1.0)

    op = TunableOp("blas", "gemm", "interpreter", "fp32", PROBLEMS[:2], lambda p: CONFIGS[:3],
                   lambda p, c: None, measure, local=lambda config: config["block_m"] == 16
                   and config["block_n"] == 16)

    def picks(margin: float | None, out: Path) -> dict[tuple[int, ...], object]:
        lf = load_logic(Tuner(op, out, progress=False, retimes=0, local_margin=margin).run())
        return {row.sizes: (lf.solutions[row.solution], row.measured["tflops"]) for row in lf.table}

    assert picks(0.05, tmp_path / "a") == {(64, 64, 64, 1): (CONFIGS[1], 96.0),  # 100 ≤ 1.05 · 96
                                           (128, 32, 256, 1): (CONFIGS[0], 106.0)}  # 106 > 100.8
    assert picks(None, tmp_path / "b")[(64, 64, 64, 1)] == (CONFIGS[0], 100.0)
    only_local = dataclasses.replace(op, candidates=lambda p: CONFIGS[:1])
    lf = load_logic(Tuner(only_local, tmp_path / "c", progress=False, local_margin=0.05).run())
    assert {lf.solutions[row.solution] for row in lf.table} == {CONFIGS[0]}  # no other: kept


def test_stream_k_margin_is_for_float_gemm(tmp_path: Path) -> None:
    from tessera.blas import space
    from tessera.blas.tune import gemm_tunable
    from tessera.tuning.tuner import config_key

    op = gemm_tunable("fp32", [(64, 64, 64, 1)], "tiny")
    assert op.local is not None and not op.local(json.loads(config_key(CONFIGS[0])))
    streamk = space.StreamKConfig(128, 256, 64, 0, 8, 3, False)
    assert op.local(json.loads(config_key(streamk)))
    with pytest.raises(SystemExit):
        main(["tune", "gemm", "--dtype", "fp32", "--stream-k-margin", "-0.1", "--out", str(tmp_path / "x")])
    assert main(["tune", "gemm", "--dtype", "int8", "--stream-k-margin", "0.05", "--sizes", "32x32x32",
                 "--out", str(tmp_path / "q")]) == 2
    assert not (tmp_path / "q").exists() or not any((tmp_path / "q").rglob("*.yaml"))


def test_two_tuners_on_one_directory(tmp_path: Path) -> None:
    Tuner(fake_op(), tmp_path, budget_s=0.0, progress=False).run()  # create the journal
    errors: list[BaseException] = []

    def tune() -> None:
        try:
            Tuner(fake_op(), tmp_path, resume=True, progress=False).run()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=tune) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    path = tmp_path / "interpreter" / "blas.gemm.fp32.yaml"
    assert len(load_logic(path).table) == len(PROBLEMS)
    assert not list(path.parent.glob(".*.tmp"))


def test_parse_sizes() -> None:
    presets = {"tiny": [(1, 2, 3, 1)]}
    expected = [(1, 2, 3, 1), (4, 5, 6, 1), (7, 8, 9, 2)]
    assert parse_sizes("tiny, 4x5x6, 7x8x9x2, 4x5x6", presets, 4) == expected
    for bad in ("4x5x0", "big", "1x2x3x4x5"):
        with pytest.raises(InvalidArgumentError, match="--sizes entry"):
            parse_sizes(bad, presets, 4)


def test_tune_gemm_help_names_every_size_preset(capsys: pytest.CaptureFixture) -> None:
    """`tune gemm --sizes`'s help lists exactly the GEMM presets the tuner knows."""
    import re

    from tessera.blas.tune import SIZE_PRESETS

    with pytest.raises(SystemExit):
        main(["tune", "gemm", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    named = re.search(r"preset names \(([^)]*)\)", text)
    assert named is not None
    assert set(named.group(1).split(", ")) == set(SIZE_PRESETS)
    assert all(k <= 1024 and m <= 256 for m, _, k, _ in SIZE_PRESETS["shortk"])


def test_cli_tune_gemm_writes_logic_and_plot(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("the tiny space is for the interpreter; the GPU run uses real spaces")
    assert main(["tune", "gemm", "--dtype", "fp32", "--sizes", "20x24x16,16x16x16x2", "--space", "tiny",
                 "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "geometric-mean gain of tuned over the heuristic default" in out
    folder = tmp_path / "interpreter"
    lf = load_logic(folder / "blas.gemm.fp32.yaml")
    assert {row.sizes for row in lf.table} == {(20, 24, 16, 1), (16, 16, 16, 2)}
    assert (folder / "blas.gemm.fp32.png").read_bytes()[:4] == b"\x89PNG"
    assert yaml.safe_load((folder / "blas.gemm.fp32.yaml").read_text())["runtime"]["backend"] == "interpreter"
    # the summary's default column is the heuristic pick's median from the sweep's own journal
    import dataclasses
    import json
    import statistics

    from tessera import device_info
    from tessera.blas.tune import default_choice

    lines = (folder / "blas.gemm.fp32.journal.jsonl").read_text().splitlines()
    journal = [json.loads(line) for line in lines]
    for sizes in ((20, 24, 16, 1), (16, 16, 16, 2)):
        config = default_choice(sizes, "fp32", device_info())
        wanted = {"kernel": config.kernel, **dataclasses.asdict(config)}
        figures = [e["tflops"] for e in journal if e["sizes"] == list(sizes) and e["status"] == "ok"
                   and json.loads(e["config"]) == wanted]
        label = "x".join(map(str, sizes)) + " "
        row = next(line.split() for line in out.splitlines() if line.startswith(label))
        assert figures and float(row[2]) == pytest.approx(statistics.median(figures), rel=1e-3)
        assert float(row[4]) >= 1.0  # the tuned pick is the best median, the default's among them


def test_cli_tune_gemm_in_a_layout(tmp_path: Path, capsys: pytest.CaptureFixture,
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """--layout NT times column-major B operands and writes the layout's own logic file, which a
    call in that layout then takes."""
    import json

    import torch

    from tessera import device_info
    from tessera.blas import explain, tune
    from tessera.blas.tune import default_choice
    from tessera.tuning.tuner import config_key

    if torch.cuda.is_available():
        pytest.skip("the tiny space is for the interpreter; the GPU run uses real spaces")
    seen: list[tuple[bool, bool]] = []
    real_gemm = tune.gemm

    def spy(a: torch.Tensor, b: torch.Tensor, **kwargs: object) -> torch.Tensor:
        seen.append((a.stride(-1) == 1, b.stride(-2) == 1 and b.stride(-1) != 1))
        return real_gemm(a, b, **kwargs)

    monkeypatch.setattr(tune, "gemm", spy)
    assert main(["tune", "gemm", "--dtype", "fp32", "--sizes", "20x24x16", "--space", "tiny", "--layout",
                 "NT", "--no-plot", "--families", "gemm_tma", "--out", str(tmp_path)]) == 0
    assert "blas.gemm.fp32.NT.yaml" in capsys.readouterr().out
    assert seen and set(seen) == {(True, True)}  # A row-major, B column-major in every timed call
    folder = tmp_path / "interpreter"
    journal = (folder / "blas.gemm.fp32.NT.journal.jsonl").read_text().splitlines()
    default = default_choice((20, 24, 16, 1), "fp32", device_info())
    # the tiny space holds tile configurations only: --families gemm_tma leaves the default alone
    assert {json.loads(line)["config"] for line in journal} == {config_key(default)}
    lf = load_logic(folder / "blas.gemm.fp32.NT.yaml")
    assert lf.problem == {"dtype": "fp32", "layout": "NT"} and not (folder / "blas.gemm.fp32.yaml").exists()
    monkeypatch.setattr(logic, "SHIPPED_LOGIC", tmp_path)
    logic.reload()
    try:
        a, w = torch.randn(20, 16), torch.randn(24, 16)
        assert "blas.gemm.fp32.NT.yaml" in explain(a, w.t()).reason
        assert "blas.gemm.fp32.NT.yaml" not in explain(a, w.t().contiguous()).reason
    finally:
        monkeypatch.undo()
        logic.reload()
    with pytest.raises(SystemExit):
        main(["tune", "gemm", "--dtype", "fp32", "--layout", "NX", "--out", str(tmp_path / "x")])
    assert main(["tune", "gemm", "--dtype", "int8", "--layout", "NT", "--out", str(tmp_path / "q")]) == 2
    assert main(["tune", "gemm", "--dtype", "fp32", "--families", "gemm_magic", "--sizes", "20x24x16",
                 "--out", str(tmp_path / "f")]) == 2


SCALED_FAMILIES = {"gemm_scaled", "gemm_scaled_tma"}


@pytest.mark.parametrize("dtype,op,kernels", [("int4_fp16", "gemm_wq", {"gemm_wq"}),
                                               ("int8", "gemm_scaled", SCALED_FAMILIES),
                                               ("fp8e4m3", "gemm_scaled", SCALED_FAMILIES)])
def test_cli_tune_gemm_quantized_ops(dtype: str, op: str, kernels: set[str], tmp_path: Path,
                                     capsys: pytest.CaptureFixture) -> None:
    """Quantized dtypes tune their own ops (sizes M×N×K), every candidate checked against fp64."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("the tiny space is for the interpreter; the GPU run uses real spaces")
    assert main(["tune", "gemm", "--dtype", dtype, "--sizes", "16x48x64", "--space", "tiny", "--no-plot",
                 "--out", str(tmp_path)]) == 0
    assert "geometric-mean gain of tuned over the heuristic default" in capsys.readouterr().out
    lf = load_logic(tmp_path / "interpreter" / f"blas.{op}.{dtype}.yaml")
    assert {row.sizes for row in lf.table} == {(16, 48, 64)}
    assert {config.kernel for config in lf.solutions.values()} <= kernels
    journal = (tmp_path / "interpreter" / f"blas.{op}.{dtype}.journal.jsonl").read_text()
    assert journal.count('"status": "ok"') >= 2  # the candidates ran and passed the check
    if op == "gemm_scaled":
        assert "gemm_scaled_tma" in journal  # the descriptor family was a candidate too
    assert '"status": "failed"' not in journal and '"status": "incorrect"' not in journal
    assert main(["tune", "gemm", "--dtype", dtype, "--sizes", "16x48x64x2", "--out", str(tmp_path)]) == 2


@pytest.mark.parametrize("dtype", ["bf16", "fp16", "fp32"])
def test_gemm_check_accepts_correct_results_with_short_k(dtype: str) -> None:
    """Regression: the bound must use the output dtype's rounding (K = 32 makes it dominate)."""
    from tessera.blas.tune import gemm_tunable

    op = gemm_tunable(dtype, [(32, 32, 32, 3)], "tiny")
    assert op.check((32, 32, 32, 3), TileConfig(32, 32, 16, 4, 4, 1)) is None


def test_gemm_check_rejects_a_wrong_result(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check compares against the fp64 product: an answer 1 % off (or NaN) is refused."""
    import torch

    from tessera.blas import tune

    op = tune.gemm_tunable("fp32", [(32, 32, 32, 1)], "tiny")
    config = TileConfig(32, 32, 16, 4, 4, 1)
    for wrong in (lambda a, b: torch.matmul(a, b) * 1.01,
                  lambda a, b: torch.full((32, 32), float("nan"), device=a.device)):
        monkeypatch.setattr(tune, "gemm", lambda a, b, precision, wrong=wrong: wrong(a, b))
        assert op.check((32, 32, 32, 1), config) is not None
    monkeypatch.setattr(tune, "gemm", lambda a, b, precision: torch.matmul(a.double(), b.double()).float())
    assert op.check((32, 32, 32, 1), config) is None


def test_weight_only_candidates_take_byte_planes_for_8_bit_codes_only() -> None:
    """The weight-only tuner adds the byte-plane form of 16-row, 4-warp tiles of at least 128
    columns for 8-bit codes (exact_bytes only for int8_bf16); 4-bit codes never get either. The
    one-row decode tiles come with and without unit codes for int8_bf16 only (the only dtype
    that launches them)."""
    from tessera._core.device import offline_device
    from tessera.blas.kernels.gemm_wq import WqConfig, WqGemvConfig
    from tessera.blas.tune import quantized_tunable

    device = offline_device("sm_90")
    for dtype in ("int4_bf16", "int8_bf16", "int8_fp16"):
        configs = [c for c in quantized_tunable(dtype, [(16, 8192, 8192)], "default", device).candidates(
            (16, 8192, 8192)) if isinstance(c, WqConfig)]
        planes = [c for c in configs if c.byte_planes]
        assert len(set(configs)) == len(configs)
        if dtype.startswith("int4"):
            assert not planes and not any(c.exact_bytes for c in configs)
            continue
        assert planes and all(c.block_m == 16 and c.num_warps == 4 and c.block_n >= 128 and not c.warp_mma
                              and not c.exact_bytes for c in planes)
        assert WqConfig(16, 128, 128, 4, 8, 4, 3, byte_planes=True) in planes  # the shipped W8A16 M = 16
        assert {dataclasses.replace(c, early_scales=True) for c in planes} <= set(planes)
        assert any(c.exact_bytes for c in configs) == (dtype == "int8_bf16")
    for dtype in ("int4_bf16", "int8_bf16", "int8_fp16"):
        decode = [c for c in quantized_tunable(dtype, [(1, 8192, 8192)], "default", device).candidates(
            (1, 8192, 8192)) if isinstance(c, WqGemvConfig)]
        units = {c for c in decode if c.unit_codes}
        assert len(set(decode)) == len(decode)
        assert units == ({dataclasses.replace(c, unit_codes=True) for c in decode} if dtype == "int8_bf16"
                         else set())


def test_quantized_default_flags_the_problem_as_a_call_would(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tuner's summary compares the tuned choice with what an untuned call of the tuner's
    operands gets: on sm_90 (outside the interpreter) the warp-specialized kernels where the call
    fits them (weight-only up to 32 rows, fp8 with fast accumulation), elsewhere not."""
    from tessera._core.device import offline_device
    from tessera.blas import quantized
    from tessera.blas.kernels.gemm_scaled import ScaledTmaConfig
    from tessera.blas.kernels.gemm_wq_ws import WqWsConfig
    from tessera.blas.kernels.gemm_ws import ScaledWsConfig
    from tessera.blas.tune import quantized_default

    monkeypatch.setattr(quantized, "interpreter_enabled", lambda: False)
    hopper, ampere = offline_device("sm_90"), offline_device("sm_80")
    for dtype, stages in (("int4_bf16", 6), ("int8_bf16", 6), ("int8_fp16", 6)):
        for m in (1, 16, 32):
            assert quantized_default((m, 8192, 8192), dtype, hopper) == WqWsConfig(stages, 3), (dtype, m)
            assert not isinstance(quantized_default((m, 8192, 8192), dtype, ampere), WqWsConfig)
        assert not isinstance(quantized_default((33, 8192, 8192), dtype, hopper), WqWsConfig)
        assert not isinstance(quantized_default((16, 8192, 8160), dtype, hopper), WqWsConfig)  # K not of 256
    assert isinstance(quantized_default((8192, 8192, 8192), "fp8e4m3_fast", hopper), ScaledWsConfig)
    assert isinstance(quantized_default((8192, 8192, 8192), "fp8e4m3", hopper), ScaledTmaConfig)
    assert not isinstance(quantized_default((8192, 8192, 8192), "fp8e4m3_fast", ampere),
                          ScaledWsConfig | ScaledTmaConfig)


@pytest.mark.parametrize("symmetric", [True, False])
def test_quantized_graph_timing_cycles_over_weight_copies(symmetric: bool, device: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The quantized tuner's timing sets are copies of the weight (codes, scales, zero points), each
    its own memory and each giving the original's product."""
    import torch

    from tessera.blas import tune
    from tessera.blas.quantized import gemm_wq, quantize_weight

    monkeypatch.setattr(tune, "cold_copies", lambda tensors: [tuple(tensors)] + [
        tuple(t.clone() for t in tensors) for _ in range(2)])  # as on a GPU: two more sets
    x = torch.randn(3, 64, dtype=torch.float16, device=device)
    q = quantize_weight(torch.randn(64, 8, dtype=torch.float16, device=device), bits=4, group_size=32,
                        symmetric=symmetric)
    sets = tune._cold_sets((x, q))
    assert len(sets) == 3 and sets[0] == (x, q)
    expected = gemm_wq(x, q)
    for xc, qc in sets[1:]:
        assert xc.data_ptr() != x.data_ptr() and qc.codes.data_ptr() != q.codes.data_ptr()
        assert qc.scales.data_ptr() != q.scales.data_ptr() and (qc.zeros is None) == symmetric
        assert (qc.bits, qc.group_size, qc.shape) == (q.bits, q.group_size, q.shape)
        assert torch.equal(gemm_wq(xc, qc), expected)


def test_retiming_defeats_the_winners_curse(tmp_path: Path) -> None:
    """A candidate whose first timing was a lucky outlier loses once it is timed again."""
    seen: dict[tuple, int] = {}

    def measure(problem: tuple[int, ...], config: TileConfig) -> float:
        seen[(problem, config)] = seen.get((problem, config), 0) + 1
        if config == CONFIGS[0]:
            return 100.0 if seen[(problem, config)] == 1 else 10.0  # lucky once
        return 50.0 if config == CONFIGS[1] else 5.0

    op = TunableOp("blas", "gemm", "interpreter", "fp32", [(64, 64, 64, 1)], lambda p: CONFIGS[:3],
                   lambda p, c: None, measure)
    lf = load_logic(Tuner(op, tmp_path, progress=False, retime_top=2, retimes=2).run())
    assert lf.solutions[lf.table[0].solution] == CONFIGS[1]
    assert lf.table[0].measured["tflops"] == 50.0
    assert seen[((64, 64, 64, 1), CONFIGS[0])] == 3 and seen[((64, 64, 64, 1), CONFIGS[2])] == 1


def test_retimes_interleave_the_top_candidates(tmp_path: Path) -> None:
    """The re-times run in rounds (each top candidate once a round), so clock drift over the run
    falls on all of them alike; a resumed run owes only the re-times not journaled yet."""
    order: list[TileConfig] = []
    figures = {CONFIGS[0]: 30.0, CONFIGS[1]: 20.0, CONFIGS[2]: 10.0}

    def measure(problem: tuple[int, ...], config: TileConfig) -> float:
        order.append(config)
        return figures[config]

    op = TunableOp("blas", "gemm", "interpreter", "fp32", [(64, 64, 64, 1)], lambda p: CONFIGS[:3],
                   lambda p, c: None, measure)
    Tuner(op, tmp_path, progress=False, retime_top=2, retimes=2).run()
    assert order[3:] == [CONFIGS[0], CONFIGS[1], CONFIGS[0], CONFIGS[1]]
    order.clear()
    Tuner(op, tmp_path, resume=True, progress=False, retime_top=2, retimes=3).run()
    assert order == [CONFIGS[0], CONFIGS[1]]


def test_resume_with_a_smaller_space(tmp_path: Path) -> None:
    """Journaled configs that are no longer candidates are neither re-timed nor a crash."""
    Tuner(fake_op(), tmp_path, progress=False).run()
    smaller = TunableOp("blas", "gemm", "interpreter", "fp32", PROBLEMS, lambda p: CONFIGS[:1],
                        lambda p, c: None, lambda p, c: 1.0)
    assert load_logic(Tuner(smaller, tmp_path, resume=True, progress=False).run()).table
