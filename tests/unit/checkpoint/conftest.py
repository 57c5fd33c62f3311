"""Real checkpoints on disk, made small: manifest directories, plain DCP directories, torch.save files."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from chaos.checkpoint.manifest import LATEST_NAME, build_manifest, write_manifest


def make_manifest_dir(path: Path, step: int, value: float = 1.0) -> Path:
    """A committed step directory the way the workloads' manager writes one (torch.save + MANIFEST.json)."""
    path.mkdir(parents=True)
    torch.save({"w": torch.full((64, 64), value), "step": step}, path / "state.pt")
    torch.save({"rng": torch.arange(16)}, path / "rng_rank0.pt")
    write_manifest(path, build_manifest(path, step, format="test"))
    return path


def make_dcp_dir(path: Path, value: float = 1.0) -> Path:
    """A plain DCP directory (.metadata + one shard), saved without a process group."""
    import torch.distributed.checkpoint as dcp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save({"model": {"w": torch.full((64, 64), value), "b": torch.zeros(64)}}, checkpoint_id=str(path))
    return path


def make_root(path: Path, steps: tuple[int, ...] = (10, 20)) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    for s in steps:
        make_manifest_dir(path / f"step_{s:06d}", s, value=float(s))
    (path / LATEST_NAME).write_text(f"step_{steps[-1]:06d}")
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_root(tmp_path / "ckpt")


class Makers:
    """The helpers above as a fixture (test modules here are not a package, so they cannot import them)."""

    manifest_dir = staticmethod(make_manifest_dir)
    dcp_dir = staticmethod(make_dcp_dir)
    root = staticmethod(make_root)


@pytest.fixture
def make() -> type[Makers]:
    return Makers
