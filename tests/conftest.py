"""Test set-up: run kernels in Triton's interpreter when there is no GPU; a ``gpu`` marker."""

from __future__ import annotations

import os

import pytest
import torch

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:  # must happen before triton or tessera kernels are imported
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "gpu: needs a CUDA or ROCm GPU (skipped without one)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device() -> str:
    """Where operands live: the GPU when there is one, else the CPU (interpreter)."""
    return "cuda" if HAS_GPU else "cpu"


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(1234)


@pytest.fixture(autouse=True)
def _isolated_install_root(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch):
    """No test reads or writes the user's real packs: TESSERA_HOME points at a fresh directory."""
    from tessera.tuning import logic

    monkeypatch.setenv("TESSERA_HOME", str(tmp_path_factory.mktemp("tessera-home")))
    logic.reload()
    yield
    logic.reload()
