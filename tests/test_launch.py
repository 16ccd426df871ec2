"""tessera._core.launch: the direct-launch cache must never reuse a binary Triton would not pick."""

from __future__ import annotations

import functools
import itertools
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import tessera
from reference import assert_gemm_close
from shipped import shipped_solutions
from tessera._core import launch
from tessera._core.launch import (
    PDL_AT_EXIT,
    PDL_EARLY,
    PDL_OFF,
    Call,
    Replay,
    building_for,
    capture,
    launch_key,
    launch_options,
    pdl_mode,
    release_scratch,
    scratch,
    specialization_key,
)
from tessera.blas import gemm, space
from tessera.blas.kernels import copy as copy_kernels
from tessera.blas.kernels import gemm_splitk, gemm_tile, gemm_tma
from tessera.blas.kernels.gemm_splitk import SplitKConfig
from tessera.blas.kernels.gemm_streamk import StreamKConfig
from tessera.blas.kernels.gemm_tile import TileConfig
from tessera.blas.kernels.gemm_tma import TmaConfig
from tessera.blas.kernels.gemm_ws import WsConfig

INTS = [0, 1, 2, 15, 16, 17, 32, 48, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, -1, -16, -(2**31) - 1]


def _triton_spec(arg: object) -> object:
    from triton._C.libtriton import native_specialize_impl
    from triton.backends.nvidia.compiler import CUDABackend

    return native_specialize_impl(CUDABackend, arg, False, True, True)


def _tensors() -> list[torch.Tensor]:
    base = torch.empty(256, dtype=torch.float32)
    half = torch.empty(256, dtype=torch.float16)
    return [base, base[1:], base[4:], base[3:], half, half[8:], half[1:]]


@pytest.mark.parametrize("values", [INTS, _tensors(), [1.5, 0.0, 1e300, True, False]],
                         ids=["ints", "tensors", "scalars"])
def test_key_is_at_least_as_fine_as_triton(values: list) -> None:
    """Whenever Triton would specialize two arguments differently, our keys differ too."""
    for x, y in itertools.combinations(values, 2):
        if _triton_spec(x) != _triton_spec(y):
            assert specialization_key(x) != specialization_key(y), (x, y)


def test_launch_key_is_the_per_argument_rule() -> None:
    """launch_key inlines the common types for speed; its key (and the pack file name, its repr)
    must equal specialization_key applied argument by argument, do_not_specialize included."""
    t = torch.empty(8, 8)
    args = (t, t[:, 1:], 1, 16, 17, 24, 0, -5, 2**31, 2**40, 2**63 + 1, 1.5, True, None,
            torch.nn.Parameter(t), 7, 2**33)
    plain = frozenset({15, 16})
    expected = (4, 3, (True, 64), tuple(specialization_key(a, i not in plain) for i, a in enumerate(args)))
    key = launch_key(args, {"FLAG": True, "BLOCK": 64}, 4, 3, plain)
    assert key == expected and repr(key) == repr(expected)


def test_unknown_argument_type_is_refused() -> None:
    with pytest.raises(TypeError, match="no specialization rule"):
        specialization_key(object())


def test_pdl_follows_the_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """Programmatic dependent launch for NVIDIA sm_90+ targets only (griddepcontrol is sm_90 PTX),
    also in pack builds for a target other than the machine's; a launch site's measured mode
    unless TESSERA_PDL overrides it."""
    cpu = torch.empty(1)
    assert pdl_mode(cpu, PDL_EARLY) == PDL_OFF  # the interpreter
    for backend, arch, supported in (("cuda", "sm_90", True), ("cuda", "sm_90a", True),
                                     ("cuda", "sm_100", True), ("cuda", "sm_80", False), ("cuda", "", False),
                                     ("hip", "gfx942", False)):
        with building_for(backend, arch):
            for measured in (PDL_OFF, PDL_EARLY, PDL_AT_EXIT):
                assert pdl_mode(cpu, measured) == (measured if supported else PDL_OFF), (backend, arch)
    for value, override in (("0", PDL_OFF), ("off", PDL_OFF), ("early", PDL_EARLY), ("exit", PDL_AT_EXIT)):
        monkeypatch.setattr(launch, "_PDL", launch._pdl_override(value))
        with building_for("cuda", "sm_90"):
            assert pdl_mode(cpu, PDL_EARLY) == override and pdl_mode(cpu, PDL_OFF) == override
        with building_for("cuda", "sm_80"):
            assert pdl_mode(cpu, PDL_EARLY) == PDL_OFF
    assert launch._pdl_override(None) is None and launch._pdl_override("1") is None
    with pytest.warns(UserWarning, match="TESSERA_PDL='sometimes'"):
        assert launch._pdl_override("sometimes") is None
    assert launch_options({"PDL": PDL_EARLY, "BLOCK": 64}) == {"launch_pdl": True}
    assert launch_options({"PDL": PDL_AT_EXIT}) == {"launch_pdl": True}
    assert launch_options({"PDL": PDL_OFF}) == {} and launch_options({"BLOCK": 64}) == {}


def test_tma_pdl_is_early_below_a_full_wave() -> None:
    """16-bit descriptor GEMMs launch with PDL early while their grid is less than a full wave
    and without it from a full wave on (the binary every such problem shares); tf32 and tf32x3
    (behind their copy of B) at exit."""
    assert gemm_tma.tma_pdl("ieee", 131, 132) == PDL_EARLY
    assert gemm_tma.tma_pdl("ieee", 132, 132) == PDL_OFF
    assert gemm_tma.tma_pdl("ieee", 2048, 132) == PDL_OFF
    assert gemm_tma.tma_pdl("tf32", 8, 132) == PDL_AT_EXIT
    assert gemm_tma.tma_pdl("tf32", 2048, 132) == PDL_AT_EXIT
    assert gemm_tma.tma_pdl("tf32x3", 8, 132) == PDL_AT_EXIT


@pytest.mark.gpu
def test_tma_takes_pdl_below_a_full_wave_only() -> None:
    """On the GPU: a 16-bit descriptor GEMM of fewer tiles than SMs is compiled with PDL, one of
    more tiles without; both results right."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("programmatic dependent launch needs sm_90")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    config = TmaConfig(64, 128, 64, 8, 4, 4)
    for tiles_m, expected in ((max(1, (sms - 1) // 8), True), (2 * sms // 8 + 1, False)):
        a = torch.randn(64 * tiles_m, 256, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(256, 128 * 8, device="cuda", dtype=torch.bfloat16)
        with space.forced(config), launch.recording() as calls:
            got = gemm(a, b)
        assert [call.launcher for call in calls] == [gemm_tma._launch]
        found = calls[0].launcher.compiled_for(calls[0])
        assert found is not None and bool(found[0].metadata.launch_pdl) == expected, tiles_m
        assert_gemm_close(got, a, b)


@pytest.mark.gpu
def test_split_k_takes_pdl_up_to_16_rows() -> None:
    """Split-K's launches take PDL early for at most 16 rows and stay off above (64 rows of 64×64
    tiles lost 6 % with it); the result is right either way."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("programmatic dependent launch needs sm_90")
    b = torch.randn(1024, 512, device="cuda", dtype=torch.bfloat16)
    for rows, config, expected in ((16, SplitKConfig(16, 64, 128, 4, 4, 3), True),
                                   (64, SplitKConfig(64, 64, 64, 4, 4, 3), False)):
        x = torch.randn(rows, 1024, device="cuda", dtype=torch.bfloat16)
        with space.forced(config), launch.recording() as calls:
            got = gemm(x, b)
        assert [call.launcher for call in calls] == [gemm_splitk._partial, gemm_splitk._reduce]
        for call in calls:
            found = call.launcher.compiled_for(call)
            assert found is not None and bool(found[0].metadata.launch_pdl) == expected, rows
        assert_gemm_close(got, x, b)


@pytest.mark.gpu
@pytest.mark.parametrize(("dtype", "precision", "config", "rows", "launchers"), [
    (torch.bfloat16, "ieee", TmaConfig(64, 128, 64, 8, 4, 4), 1024, ["gemm_tma"]),  # PDL early
    (torch.float32, "tf32", TmaConfig(64, 128, 32, 8, 4, 3), 1024, ["copy", "gemm_tma"]),  # both at exit
    (torch.bfloat16, "ieee", TileConfig(64, 64, 32, 8, 4, 2), 1024, ["gemm_tile"]),  # early
    (torch.bfloat16, "ieee", SplitKConfig(16, 64, 128, 4, 4, 3), 16,  # early up to 16 rows
     ["splitk_partial", "splitk_reduce"]),
])
def test_dependent_launches_see_the_previous_kernel(dtype: torch.dtype, precision: str, config: object,
                                                    rows: int, launchers: list[str]) -> None:
    """A chain of GEMMs, each reading the one before it (and one writing into the matrix the one
    before it read): with PDL each launch may start while the previous one finishes, and must
    still see its output (and not overwrite its input early). Every launch site whose shipped
    mode is not off is in a chain: the 16-bit and tf32 descriptor GEMMs, tf32's copy of B, tiles,
    split-K's partial products and their sum."""
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("programmatic dependent launch needs sm_90")
    gen = torch.Generator(device="cuda").manual_seed(5)
    b = torch.randn(1024, 1024, device="cuda", dtype=dtype, generator=gen) / 32
    x = torch.randn(rows, 1024, device="cuda", dtype=dtype, generator=gen)
    want = x.double()
    y = torch.empty_like(x)
    with space.forced(config):
        for _ in range(8):
            gemm(x, b, out=y, precision=precision)  # reads x
            gemm(y, b, out=x, precision=precision)  # reads y, just written; writes x, read before
            want = want @ b.double() @ b.double()
        torch.cuda.synchronize()
        with launch.recording() as calls:
            gemm(x, b, precision=precision)
    launchers_by_name = {"copy": copy_kernels._launch, "gemm_tma": gemm_tma._launch,
                         "gemm_tile": gemm_tile._launch, "splitk_partial": gemm_splitk._partial,
                         "splitk_reduce": gemm_splitk._reduce}
    assert [call.launcher for call in calls] == [launchers_by_name[name] for name in launchers]
    for call, name in zip(calls, launchers, strict=True):
        found = call.launcher.compiled_for(call)
        assert found is not None and found[0].metadata.launch_pdl, name
    rel = ((x.double() - want).norm() / want.norm()).item()
    assert rel < 0.05, rel


@pytest.mark.gpu
def test_launcher_reuses_binaries_and_respecializes() -> None:
    launcher = gemm_tile._launch
    a = torch.randn(100, 64, device="cuda")
    b = torch.randn(64, 80, device="cuda")
    with space.forced(TileConfig(32, 32, 32, 8, 4, 2)):
        gemm(a, b)
        first = launcher.jit_launches
        for _ in range(3):
            d = gemm(a, b)
        assert launcher.jit_launches == first, "a repeated call went through Triton's JIT"
        assert_gemm_close(d, a, b)
        shifted = torch.randn(100 * 64 + 1, device="cuda")[1:].view(100, 64)  # 4-byte aligned only
        d2 = gemm(shifted, b)
        assert launcher.jit_launches == first + 1, "a new alignment must be specialized anew"
        assert_gemm_close(d2, shifted, b)
        c = torch.randn(100, 80, device="cuda")
        d3 = gemm(a, b, c, beta=1.0, alpha=2.0)  # other constexprs (HAS_C, SCALE_ALPHA)
        assert_gemm_close(d3, a, b, c, alpha=2.0, beta=1.0)
        assert launcher.jit_launches == first + 2


@pytest.mark.parametrize("config", [TileConfig(16, 16, 16, 1, 4, 1), TmaConfig(64, 64, 16, 8, 4, 2)],
                         ids=lambda c: c.kernel)
@pytest.mark.parametrize(("trans_a", "trans_b"), [(False, False), (True, True)], ids=["NN", "TT"])
def test_repeat_calls_replay_the_launch_on_new_operands(config: space.Config, trans_a: bool, trans_b: bool,
                                                        device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeat call replays the first call's launch (no family launcher runs) with the new
    call's operands: right results for other data, transposed operands included."""
    from tessera.blas import api

    api._RECIPES.clear()
    shape_a, shape_b = ((48, 80) if trans_a else (80, 48)), ((64, 48) if trans_b else (48, 64))
    a, b = torch.randn(shape_a, device=device), torch.randn(shape_b, device=device)
    with space.forced(config):
        assert_gemm_close(gemm(a, b, trans_a=trans_a, trans_b=trans_b), a, b, trans_a=trans_a,
                          trans_b=trans_b)
        (recipe,) = api._RECIPES.recipes()
        assert recipe.replays is not None and len(recipe.replays) == 1 and recipe.choice.config == config
        monkeypatch.setattr(api, "_launch", None)  # a replay must not go through the family launcher
        with capture() as calls:  # capture (pack builds) still sees the launch
            gemm(a, b, trans_a=trans_a, trans_b=trans_b)
        assert len(calls) == 1 and calls[0].constexprs == recipe.replays[0].call.constexprs
        for _ in range(2):
            a, b = torch.randn(shape_a, device=device), torch.randn(shape_b, device=device)
            assert_gemm_close(gemm(a, b, trans_a=trans_a, trans_b=trans_b), a, b, trans_a=trans_a,
                              trans_b=trans_b)


@pytest.mark.parametrize(("dtype", "config"), shipped_solutions("blas", "gemm"),
                         ids=lambda v: v.short() if hasattr(v, "short") else str(v))
def test_every_shipped_gemm_solution_replays(dtype: str, config: space.Config, device: str) -> None:
    """Each configuration the shipped GEMM logic chooses (as forced; where a descriptor family
    cannot run, whatever the forced selection falls back to) keeps a recipe whose launches all
    replay, so eager repeat calls skip validation, selection and argument building (the
    weight-only byte planes once silently kept none: e72ce71)."""
    from tessera.blas import api

    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32,
                   "fp32": torch.float32}[dtype]
    if device == "cpu" and torch_dtype == torch.bfloat16:
        torch_dtype = torch.float16  # the interpreter's tl.dot on bf16 is wrong; the launches count
    precision = "tf32" if dtype == "tf32" else "ieee"
    gen = torch.Generator().manual_seed(21)
    a = torch.randn(48, 256, generator=gen).to(torch_dtype).to(device)
    b = torch.randn(256, 80, generator=gen).to(torch_dtype).to(device)
    api._RECIPES.clear()
    with space.forced(config):
        assert_gemm_close(gemm(a, b, precision=precision), a, b, precision=precision)
        (recipe,) = api._RECIPES.recipes()
        assert recipe.replays is not None, recipe.choice.config.short()
        assert_gemm_close(gemm(a, b, precision=precision), a, b, precision=precision)  # replayed


def test_a_recording_sees_launches_recorded_inside_it(device: str) -> None:
    """A first ``gemm`` call records its launches for its recipe; a caller's enclosing recording
    (or capture) still sees them, and in order, as it sees a repeat call's replayed launch."""
    from tessera._core.launch import recording
    from tessera.blas import api

    api._RECIPES.clear()
    a, b = torch.randn(40, 48, device=device), torch.randn(48, 32, device=device)
    with space.forced(SplitKConfig(16, 16, 16, 3, 4, 1)), recording() as outer:
        gemm(a, b)  # plans: its two launches (partials, their sum) recorded for the recipe
        gemm(a, b)  # replays them
    kernels = [call.launcher.kernel.fn.__name__ for call in outer]
    assert len(kernels) == 4 and kernels[:2] == kernels[2:] and kernels[0] != kernels[1], kernels
    with space.forced(SplitKConfig(16, 16, 16, 3, 4, 1)), capture() as captured:
        api._RECIPES.clear()
        gemm(a, b)
    assert len(captured) == 2


def test_no_replay_for_operands_sharing_memory(device: str) -> None:
    """Where op(A) and op(B) are views of one buffer, a recorded argument could stand for either:
    no replay is built, and repeat calls (planned again each time) stay right."""
    from tessera.blas import api

    api._RECIPES.clear()
    x = torch.randn(32, 32, device=device)
    with space.forced(TileConfig(16, 16, 16, 1, 4, 1)):
        for _ in range(2):
            assert_gemm_close(gemm(x, x, trans_b=True), x, x, trans_b=True)
    (recipe,) = api._RECIPES.recipes()
    assert recipe.replays is None
    y = torch.randn(32, 32, device=device)
    assert_gemm_close(gemm(y, x, trans_b=True), y, x, trans_b=True)


def test_replay_maps_each_argument_to_one_operand() -> None:
    a, b, d = torch.empty(8, 4), torch.empty(4, 6), torch.empty(8, 6)
    calls = [Call(gemm_tile._launch, (1,), (a, b.t(), d, 8, 1.0), {}, 4, 1)]
    replay = Replay.of(calls, (a, b, d))
    assert replay is not None
    assert replay.slots == ((0, 0, False, False), (1, 1, True, False), (2, 2, False, False))
    assert Replay.of(calls, (a, b, d[:, :3])) is None  # d is another view of an operand's memory
    assert Replay.of([*calls, *calls], (a, b, d)) is None  # one launch only
    stray = [Call(gemm_tile._launch, (1,), (a, torch.empty(3), d), {}, 4, 1)]
    assert Replay.of(stray, (a, b, d)) is None  # a workspace the operands do not provide, not kept
    kept = scratch("test", 16, torch.float32, torch.device("cpu"), True)
    replay = Replay.of([Call(gemm_tile._launch, (1,), (a, kept, d), {}, 4, 1)], (a, b, d))
    assert replay is not None and replay.scratches == ((1, ("test", 16, torch.float32, torch.device("cpu"),
                                                             True)),)
    assert replay.call.args[1] is None  # asked for again at each replay, not held
    release_scratch()


def test_scratch_is_kept_per_use_and_fresh_while_captured(device: str) -> None:
    """A kept buffer comes back for the same use (and grows); a capture (pack builds) gets a
    fresh one, never kept; release_scratch drops them."""
    release_scratch()
    dev = torch.device(device)
    counters = scratch("test counters", 8, torch.int32, dev, True)
    assert counters.numel() == 8 and not counters.any()
    assert scratch("test counters", 4, torch.int32, dev, True) is counters
    assert scratch("test pieces", 4, torch.int32, dev, False) is not counters
    grown = scratch("test counters", 9, torch.int32, dev, True)
    assert grown is not counters and grown.numel() == 9 and not grown.any()
    with capture():
        assert scratch("test counters", 4, torch.int32, dev, True) is not grown
    tessera.release_scratch()  # the public name
    assert scratch("test counters", 4, torch.int32, dev, True) is not grown


def test_scratch_is_kept_per_thread() -> None:
    """Another thread gets buffers of its own (a call's launches never interleave with another
    thread's use of a buffer on a shared stream); release_scratch drops every thread's."""
    import threading

    release_scratch()
    cpu = torch.device("cpu")
    mine = scratch("test", 8, torch.int32, cpu, True)
    theirs: list[torch.Tensor] = []
    worker = threading.Thread(target=lambda: theirs.extend(scratch("test", 8, torch.int32, cpu, True)
                                                           for _ in range(2)))
    worker.start()
    worker.join()
    assert theirs[0] is theirs[1] and theirs[0] is not mine
    assert scratch("test", 8, torch.int32, cpu, True) is mine
    release_scratch()
    assert scratch("test", 8, torch.int32, cpu, True) is not mine


def test_stream_k_repeat_calls_replay_and_leave_the_counters_zeroed(device: str) -> None:
    """Stream-K's pieces and tile counters are kept scratch buffers, so a repeat call replays its
    launch; every launch leaves the counters zeroed (no fill runs before the next one), which
    right results on new operands over several calls show, as does the buffer itself."""
    from tessera.blas import api

    api._RECIPES.clear()
    release_scratch()
    config = StreamKConfig(16, 16, 16, 7, 4, 1)  # 6 tiles on 7 programs: every tile shared
    with space.forced(config):
        a, b = torch.randn(41, 75, device=device), torch.randn(75, 37, device=device)
        assert_gemm_close(gemm(a, b), a, b)
        (recipe,) = api._RECIPES.recipes()
        (replay,) = recipe.replays
        assert len(replay.scratches) == 2
        for _ in range(2):
            a, b = torch.randn(41, 75, device=device), torch.randn(75, 37, device=device)
            assert_gemm_close(gemm(a, b), a, b)
    counters = scratch("streamk counters", 6, torch.int32, torch.device(device), True)
    assert counters.numel() >= 6 and not counters.any()
    release_scratch()


def test_split_k_repeat_calls_replay_both_launches(device: str) -> None:
    """Split-K's partials go to a kept scratch buffer, so a repeat call replays both launches (the
    partials, then their fixed-order sum) on new operands, C and alpha left out of recipes."""
    from tessera.blas import api

    api._RECIPES.clear()
    release_scratch()
    with space.forced(SplitKConfig(16, 16, 16, 3, 4, 1)):
        for i in range(3):
            a, b = torch.randn(20, 70, device=device), torch.randn(70, 24, device=device)
            assert_gemm_close(gemm(a, b, alpha=1.5), a, b, alpha=1.5)
            if i == 0:
                (recipe,) = api._RECIPES.recipes()
                assert recipe.replays is not None and len(recipe.replays) == 2
                assert [len(r.scratches) for r in recipe.replays] == [1, 1]  # the same partials buffer
    release_scratch()


def test_scratch_above_the_kept_size_is_fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request above SCRATCH_KEPT_BYTES gets a buffer of its own that is not kept (a large
    problem's workspace goes back to torch's allocator), zeroed when asked."""
    from tessera._core import launch

    monkeypatch.setattr(launch, "SCRATCH_KEPT_BYTES", 64)
    release_scratch()
    small = scratch("test", 16, torch.float32, torch.device("cpu"), True)
    assert scratch("test", 16, torch.float32, torch.device("cpu"), True) is small  # 64 bytes: kept
    large = scratch("test", 17, torch.float32, torch.device("cpu"), True)
    assert large is not scratch("test", 17, torch.float32, torch.device("cpu"), True) and not large.any()
    release_scratch()


def test_a_recipe_holds_no_operand(device: str) -> None:
    """Recipes outlive calls (up to 512 of them): a replay keeps no tensor of the call it was
    recorded from alive, or repeat-call caching would pin GPU memory."""
    import gc
    import weakref

    from tessera.blas import api

    api._RECIPES.clear()
    a, b = torch.randn(48, 32, device=device), torch.randn(32, 40, device=device)
    with space.forced(TileConfig(16, 16, 16, 1, 4, 1)):
        d = gemm(a, b)
    (recipe,) = api._RECIPES.recipes()
    assert recipe.replays is not None
    refs = [weakref.ref(t) for t in (a, b, d)]
    del a, b, d
    gc.collect()
    assert all(ref() is None for ref in refs)


@pytest.mark.gpu
def test_replay_honours_a_disabled_direct_launch(monkeypatch: pytest.MonkeyPatch) -> None:
    """With direct launches turned off (TESSERA_DIRECT_LAUNCH=0, or host_overhead's JIT rows), a
    repeat call goes through Triton's JIT even after a replay has found its binary."""
    from tessera._core import launch
    from tessera._core.launch import Launcher
    from tessera.blas import api

    api._RECIPES.clear()
    a, b = torch.randn(64, 64, device="cuda"), torch.randn(64, 64, device="cuda")
    with space.forced(TileConfig(16, 16, 16, 1, 4, 1)):
        for _ in range(2):
            gemm(a, b)  # the second call replays through the direct path
        monkeypatch.setattr(Launcher, "enabled", False)

        def direct(*args: object) -> None:
            raise AssertionError("a direct launch while direct launches are off")

        monkeypatch.setattr(launch, "run_compiled", direct)
        assert_gemm_close(gemm(a, b), a, b)


def test_a_launch_switches_to_its_operands_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """With several GPUs, a launch on another GPU's tensors (FakeTensors on "cuda:1" here, the
    device switch recorded) runs with that GPU current — its binary, context and stream — as
    torch's own ops do; on the current GPU's tensors, or on CPU tensors, it does not switch."""
    import contextlib

    from torch._subclasses import fake_tensor
    from torch._subclasses.fake_tensor import FakeTensorMode

    current, entered = [0], []

    @contextlib.contextmanager
    def switch(index: int) -> Iterator[None]:
        entered.append(index)
        before, current[0] = current[0], index
        try:
            yield
        finally:
            current[0] = before

    monkeypatch.setattr(launch, "several_gpus", lambda: True)
    # a fake tensor on a real CUDA build makes a real one on its device first: none for cuda:1 here
    monkeypatch.setattr(fake_tensor, "init_gpu_context", lambda device: None, raising=False)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: current[0])
    monkeypatch.setattr(torch.cuda, "device", switch)
    with FakeTensorMode(allow_non_fake_inputs=True):
        on_1, on_0 = torch.empty(16, device="cuda:1"), torch.empty(16, device="cuda:0")
    for t, switched in ((on_1, [1]), (on_0, []), (torch.empty(16), [])):
        entered.clear()
        with capture() as calls:
            gemm_tile._launch((1,), (t, 16), {}, 4, 1)
        assert entered == switched and len(calls) == 1 and current == [0]
    assert launch.operands_device([3, None, on_1]) == 1 and launch.operands_device([1.0]) is None


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gemm_on_the_second_gpu_while_the_first_is_current(dtype: torch.dtype) -> None:
    """First and repeat calls (the replay) on cuda:1 operands with cuda:0 current: the result is
    right and on cuda:1, and the current device is left as it was."""
    torch.cuda.set_device(0)
    a = torch.randn(1000, 512, device="cuda:1", dtype=dtype)
    b = torch.randn(512, 768, device="cuda:1", dtype=dtype)
    for _ in range(3):
        d = gemm(a, b)
        assert d.device == a.device and torch.cuda.current_device() == 0
        assert_gemm_close(d, a, b)


def test_loaded_libcuda_names_the_mapped_driver_folder(tmp_path: Path) -> None:
    """The folder of the mapped ``libcuda.so*`` when it holds the ``libcuda.so.1`` Triton links
    against; None without one, or without a readable map."""
    driver = tmp_path / "drv"
    driver.mkdir()
    (driver / "libcuda.so.580.65.06").write_text("")
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r--p 00000000 00:00 0 /usr/lib/libc.so.6\n"
                    f"7f02-7f03 r-xp 00000000 00:00 0 {driver}/libcuda.so.580.65.06\n"
                    "7f04-7f05 rw-p 00000000 00:00 0 [heap]\n")
    assert launch.loaded_libcuda(str(maps)) is None  # no libcuda.so.1 beside it
    (driver / "libcuda.so.1").symlink_to("libcuda.so.580.65.06")
    assert launch.loaded_libcuda(str(maps)) == str(driver)
    assert launch.loaded_libcuda(str(tmp_path / "absent")) is None
    maps.write_text("7f00-7f01 r--p 00000000 00:00 0 /usr/lib/libc.so.6\n")
    assert launch.loaded_libcuda(str(maps)) is None


def test_triton_is_told_the_loaded_libcuda_only_when_the_user_named_none(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from triton import knobs

    monkeypatch.setattr(launch, "loaded_libcuda", lambda: str(tmp_path))
    monkeypatch.delenv("TRITON_LIBCUDA_PATH", raising=False)  # restored after the test
    before = knobs.nvidia.libcuda_path  # on a GPU, what this process's first launch set
    try:
        knobs.nvidia.libcuda_path = knobs.env  # as in a fresh process: no choice made yet
        launch._triton_runtime.__wrapped__()
        assert knobs.nvidia.libcuda_path == str(tmp_path)
        knobs.nvidia.libcuda_path = knobs.env
        monkeypatch.setenv("TRITON_LIBCUDA_PATH", "/the/users/choice")
        launch._triton_runtime.__wrapped__()
        assert knobs.nvidia.libcuda_path == "/the/users/choice"
    finally:
        knobs.nvidia.libcuda_path = before


class _Triton36Launcher:
    """Triton 3.6's ``CudaLauncher`` as far as a replay sees it: the C function (``raw``, here a
    recorder of its arguments) wrapped by a closure over the same names that expands each tensor
    descriptor with the driver module's ``make_tensordesc_arg`` (the wrapper's code, as 3.6 has
    it), and ``__call__`` passing the same leading arguments."""

    def __init__(self, module: object, raw: object, indices: set[int], meta: list | None,
                 global_scratch_size: int = 0) -> None:
        self.launch_cooperative_grid, self.launch_pdl = False, True
        self.global_scratch_size, self.profile_scratch_size = global_scratch_size, 0
        self.launch = self._wrap(module, raw, indices, meta) if indices else raw

    @staticmethod
    def _wrap(module: object, launcher: object, tensordesc_indices: set[int], tensordesc_meta: list | None):
        make_tensordesc_arg = module.make_tensordesc_arg  # type: ignore[attr-defined]  # a global in 3.6

        def inner(*args: object, make_tensordesc_arg: Any = make_tensordesc_arg) -> object:
            final_args = list(args[:13])
            tensordesc_idx = 0
            for i, arg in enumerate(args[13:]):
                if i in tensordesc_indices:
                    meta = tensordesc_meta[tensordesc_idx] if tensordesc_meta else None
                    final_args.extend(make_tensordesc_arg(arg, meta))
                    tensordesc_idx += 1
                else:
                    final_args.append(arg)
            return launcher(*final_args)  # type: ignore[operator]

        return inner

    def __call__(self, gridX: int, gridY: int, gridZ: int, stream: int, function: int, *args: object) -> None:
        self.launch(gridX, gridY, gridZ, stream, function, self.launch_cooperative_grid, self.launch_pdl,
                    None, None, *args)


_Triton36Launcher.__name__ = "CudaLauncher"


def _triton36_stand_in(monkeypatch: pytest.MonkeyPatch, hooks: tuple = (None, None), global_scratch: int = 0):
    """A descriptor kernel's compiled form under Triton 3.6's launcher, the module encoding maps as
    (address, metadata) pairs and counting them, and the runtime it launches on (device 0,
    stream 7); returns (compiled, module, what the C function received)."""
    import types

    received: list[tuple] = []
    module = types.SimpleNamespace(_BASE_ARGS_FORMAT="iiiKKppOOOOOO", encoded=[])

    def make_tensordesc_arg(arg: object, meta: dict) -> list:
        module.encoded.append(arg.base.data_ptr())  # type: ignore[attr-defined]
        return [("map", arg.base.data_ptr(), meta["id"]), *arg.shape, *arg.strides]  # type: ignore[attr-defined]

    module.make_tensordesc_arg = make_tensordesc_arg
    run = _Triton36Launcher(module, lambda *args: received.append(args), {0, 1}, [{"id": "A"}, {"id": "B"}],
                            global_scratch)
    compiled = types.SimpleNamespace(run=run, function=99, packed_metadata=(4, 1, 0))
    enter, leave = hooks
    runtime = types.SimpleNamespace(launch_enter_hook=enter, launch_exit_hook=leave)
    knobs = types.SimpleNamespace(runtime=runtime)
    active = types.SimpleNamespace(get_current_device=lambda: 0, get_current_stream=lambda index: 7)
    monkeypatch.setattr(launch, "_triton_runtime", lambda: (knobs, types.SimpleNamespace(active=active)))
    monkeypatch.setattr(launch, "raw_launcher", functools.partial(launch.raw_launcher, driver_module=module))
    return compiled, module, received


def _descriptor_replay(compiled: object) -> Replay:
    """A replay of one launch taking descriptors over A and Bᵀ, D's pointer, a float and a size."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    launcher = types.SimpleNamespace(enabled=True, compiled_for=lambda call: (compiled, 0))
    a, b, d = torch.empty(32, 16), torch.empty(32, 24).t(), torch.empty(16, 24)  # b column-major
    descriptors = [TensorDescriptor(t, list(t.shape), list(t.stride()), [16, 16]) for t in (a, b.t())]
    replay = Replay.of([Call(launcher, (3, 2), (*descriptors, d, 1.5, 24), {"BLOCK": 16}, 4, 1)],  # type: ignore[arg-type]
                       (a, b, d))
    assert replay is not None
    assert replay.slots == ((0, 0, False, True), (1, 1, True, True), (2, 2, False, False))
    return replay


def _operands() -> tuple[torch.Tensor, ...]:
    """New operands in the layouts of :func:`_descriptor_replay`'s."""
    return torch.randn(32, 16), torch.randn(32, 24).t(), torch.randn(16, 24)


def _as_pointers(args: tuple) -> tuple:
    """A launch's arguments as the C function reads them: a tensor by its address."""
    return tuple(arg.data_ptr() if isinstance(arg, torch.Tensor) else arg for arg in args)


def test_a_replay_calls_the_c_launcher_with_what_tritons_wrappers_pass(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Under Triton 3.6's launcher layout a replay calls the kernel's C function itself: the same
    arguments, in the same order, as ``compiled.run`` passes it through Triton's wrappers (tensors
    compared by address, which is all the C function reads of them), a new alpha written in, and
    each descriptor's TMA map encoded once per operand address."""
    compiled, module, received = _triton36_stand_in(monkeypatch)
    replay = _descriptor_replay(compiled)
    calls = [_operands() for _ in range(2)]
    for operands, alpha in ((calls[0], 2.0), (calls[1], -1.0), (calls[0], 0.5)):
        replay(operands, [(3, alpha)])
        launch.run_compiled(compiled, (3, 2), tuple(replay._bound(operands, [(3, alpha)])), 0)
        direct, wrapped = received[-2:]
        assert _as_pointers(direct) == _as_pointers(wrapped)
        assert direct[:13] == (3, 2, 1, 7, 99, False, True, None, None, (4, 1, 0), None, None, None)
        assert direct[13] == ("map", operands[0].data_ptr(), "A")  # then A's and Bᵀ's sizes, strides
        assert direct[13 + 5 + 5] == operands[2].data_ptr() and direct[13 + 5 + 5 + 1] == alpha
    # per call the wrapped path encodes 2 maps; the replay 2 for each new address pair, then none
    assert len(module.encoded) == 3 * 2 + 2 * 2


@pytest.mark.parametrize("why", ["hook", "scratch", "disabled", "other layout", "decomposed",
                                 "other descriptors"])
def test_a_replay_keeps_tritons_launch_path_where_the_c_launcher_is_not_known(
        monkeypatch: pytest.MonkeyPatch, why: str) -> None:
    """A launch hook (a profiler's), a kernel with global scratch (Triton allocates it per launch),
    ``TESSERA_RAW_LAUNCH=0``, another Triton's launcher layout, descriptors not lowered to TMA
    maps, or a binary whose descriptor arguments are not the replay's: the replay goes through
    ``compiled.run`` and the wrappers, as before."""
    hook = types.SimpleNamespace(calls=[print])
    compiled, module, received = _triton36_stand_in(
        monkeypatch, hooks=(hook, None) if why == "hook" else (None, None),
        global_scratch=64 if why == "scratch" else 0)
    if why == "disabled":
        monkeypatch.setattr(Replay, "raw_enabled", False)
    elif why == "other layout":
        module._BASE_ARGS_FORMAT = "iiiKKppOOOOOOOO"  # type: ignore[attr-defined]
    elif why == "decomposed":
        compiled.run = _Triton36Launcher(module, received.append, {0, 1}, None)  # type: ignore[attr-defined]
    elif why == "other descriptors":  # the binary's descriptor arguments are not the replay's
        compiled.run = _Triton36Launcher(module, received.append, {0}, [{"id": "A"}])  # type: ignore[attr-defined]
    known = why in ("hook", "disabled", "other descriptors")
    assert (launch.raw_launcher(compiled) is not None) == known
    wrapped: list[tuple] = []
    monkeypatch.setattr(launch, "run_compiled", lambda *args: wrapped.append(args))
    replay = _descriptor_replay(compiled)
    replay(_operands())
    assert len(wrapped) == 1 and not received


@pytest.mark.gpu
@pytest.mark.parametrize("config", [TmaConfig(64, 64, 32, 8, 4, 3), WsConfig(128, 128, 64, 8, 8, 3)],
                         ids=lambda c: c.kernel)
def test_repeat_descriptor_calls_replay_through_the_c_launcher(config: space.Config,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """On Triton 3.6 a repeat bf16 call of a descriptor family (gemm_tma, gemm_ws in Gluon) replays
    through its kernel's C launcher, each operand's TMA map kept by address: right results on
    three operand sets in turn, twice (B transposed in one); on another Triton, through
    ``compiled.run``, right too."""
    import triton

    from tessera.blas import api

    launches: list[object] = []
    through = launch.RawLauncher.__call__
    monkeypatch.setattr(launch.RawLauncher, "__call__",
                        lambda self, *args: (launches.append(self), through(self, *args))[1])
    api._RECIPES.clear()
    sets = [(torch.randn(200, 256, device="cuda").bfloat16(), torch.randn(256, 136, device="cuda").bfloat16())
            for _ in range(3)]
    known: set[int] = set()  # the operands' addresses
    with space.forced(config):
        for trans_b in (False, True):
            turns = [(a, b.t().contiguous().t() if trans_b else b) for a, b in sets]
            for a, b in turns * 2:
                assert_gemm_close(gemm(a, b), a, b)
            known |= {t.data_ptr() for pair in turns for t in pair}
    replays = [r for recipe in api._RECIPES.recipes() for r in recipe.replays or ()]
    assert len(replays) == 2  # one recipe a layout of B
    if triton.__version__.startswith("3.6."):
        assert len(launches) == 2 * 5  # every call but each layout's first
        for replay in replays:  # A's and B's maps: one per address they came at
            positions = [position for position, address in replay._maps if address in known]
            assert positions and max(positions.count(p) for p in positions) <= 3
    else:
        assert not launches
