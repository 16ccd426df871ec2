"""rand launch configurations through logic files and the tuner: selection order, invariance of
the bits under every configuration a logic file may name, the `tessera tune rand` command."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
import yaml

from tessera import InvalidArgumentError, device_info
from tessera.cli import main
from tessera.rand import Generator, space
from tessera.rand.space import MrgConfig, PhiloxConfig, SobolConfig
from tessera.tuning import load_logic, logic


def _install(op: str, dtype: str, solution: dict, rows: list[dict]) -> Path:
    """A logic file in the installed pack (conftest gives each test a fresh TESSERA_HOME)."""
    arch = device_info().arch
    path = Path(os.environ["TESSERA_HOME"]) / "current" / "logic" / arch / f"rand.{op}.{dtype}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({
        "schema": 1, "arch": arch, "library": "rand", "op": op, "problem": {"dtype": dtype},
        "solutions": [{"id": 0, **solution}], "table": [{**row, "solution": 0} for row in rows]}))
    logic.reload()
    return path


def test_draws_select_through_installed_logic_then_the_heuristic(device: str) -> None:
    info = device_info(device)
    before = space.select("philox4x32_10", "normal", torch.float16, (1000,), info)  # nothing shipped
    assert before.config == space.heuristic("philox_normal", info.arch).config
    assert "no installed pack logic" in before.reason and "no shipped logic" in before.reason
    expected = Generator(seed=5, device=device).normal(1000, dtype=torch.float16)
    path = _install("philox_normal", "fp16", {"kernel": "philox", "block": 32, "num_warps": 1},
                    [{"n": 1000}])
    choice = space.select("philox4x32_10", "normal", torch.float16, (1000,), info)
    assert choice.config == PhiloxConfig(32, 1) and str(path) in choice.reason
    assert torch.equal(Generator(seed=5, device=device).normal(1000, dtype=torch.float16), expected)
    # other dtypes and generators keep their own (absent) files
    assert space.select("philox4x32_10", "normal", torch.float64, (1000,), info).reason != choice.reason


def test_sobol_logic_rows_are_points_by_dimensions(device: str) -> None:
    info = device_info(device)
    _install("sobol32_uniform", "fp32", {"kernel": "sobol32", "values": 64, "steps": 2, "num_warps": 2},
             [{"points": 100, "dims": 3}])
    assert space.select("sobol32", "uniform", torch.float32, (100, 3), info).config == SobolConfig(64, 2, 2)
    expected = Generator("sobol32", dimensions=3, device=device).uniform(100)
    with space.forced(SobolConfig(2048, 16, 8)):
        assert torch.equal(Generator("sobol32", dimensions=3, device=device).uniform(100), expected)


def test_a_logic_file_naming_another_family_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rand.philox_uniform.fp32.yaml"
    path.write_text(yaml.safe_dump({
        "schema": 1, "arch": "sm_90", "library": "rand", "op": "philox_uniform", "problem": {"dtype": "fp32"},
        "solutions": [{"id": 0, "kernel": "mrg32k3a", "block": 128}], "table": [{"n": 1, "solution": 0}]}))
    with pytest.raises(Exception, match="'mrg32k3a' is not a kernel family of this op"):
        load_logic(path)


@pytest.mark.parametrize("family", ["philox", "mrg32k3a", "sobol32"])
def test_heuristic_logic_documents_load(family: str) -> None:
    from tessera._core.device import offline_device

    device = offline_device("gfx1103")
    for op in [o for o in logic.registered_ops() if o[0] == "rand" and o[1].startswith(family)]:
        spec = logic.registered_ops()[op]
        for doc in spec.heuristic(device):
            assert doc["arch"] == "gfx1103" and doc["origin"] == "heuristic"
            assert doc["solutions"][0]["kernel"] == family
    # integer MRG32k3a arithmetic where fp64 is slow, fp64 + integer where it is fast
    assert space.heuristic("mrg32k3a_uniform", "gfx1103").config.int_m1
    assert not space.heuristic("mrg32k3a_uniform", "sm_90").config.int_m1


def test_mrg_chunk_follows_the_config() -> None:
    config = MrgConfig(lanes=1 << 10, max_chunk=256)
    assert [config.chunk(n) for n in (1, 1 << 15, 1 << 17, 1 << 30)] == [32, 32, 128, 256]


def test_tune_rand_checks_bits_and_writes_logic(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    if torch.cuda.is_available():
        pytest.skip("the tiny space is for the interpreter; the GPU run uses real spaces")
    assert main(["tune", "rand", "--op", "philox_normal", "--dtype", "bf16", "--sizes", "tiny,1000",
                 "--space", "tiny", "--no-plot", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "geometric-mean gain of tuned over the heuristic default" in out
    lf = load_logic(tmp_path / "interpreter" / "rand.philox_normal.bf16.yaml")
    assert {row.sizes for row in lf.table} == {(4096,), (1000,)}
    assert all(isinstance(config, PhiloxConfig) for config in lf.solutions.values())
    journal = (tmp_path / "interpreter" / "rand.philox_normal.bf16.journal.jsonl").read_text()
    assert journal.count('"status": "ok"') >= 4  # every candidate's bits matched the heuristic's


def test_tune_rand_rejects_bad_requests(tmp_path: Path) -> None:
    from tessera.rand.tune import drawer, split_op

    with pytest.raises(InvalidArgumentError, match="op must be one of"):
        split_op("philox_poisson")
    with pytest.raises(InvalidArgumentError, match="int32 for raw words"):
        drawer("philox_bits", "fp32", "cpu")
    assert main(["tune", "rand", "--op", "sobol32_normal", "--out", str(tmp_path)]) == 2
