"""storage-full and read-only-storage against a real tmpfs / loop ext4 mounted over a checkpoint directory (root only)."""

from __future__ import annotations

import errno
import os
import random
from pathlib import Path

import pytest

from chaos.runtime.context import HarnessLog, RunContext
from chaos.errors import CapabilityError, FaultError
from chaos.faults.read_only_storage import ReadOnlyStorage, ReadOnlyStorageConfig
from chaos.faults.storage_full import StorageFull, StorageFullConfig
from chaos.runtime.ledger import Ledger
from chaos.runtime.shell import Shell
from chaos.faults.ckpt_mount import check_can_mount

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to mount: run as root or in CI (.ci/run)")


@pytest.fixture
def run(tmp_path: Path):
    log = HarnessLog(tmp_path / "harness.jsonl")
    ctx = RunContext(experiment=None, run_dir=tmp_path, ckpt_dir=tmp_path / "ckpt", ledger=Ledger(tmp_path),  # type: ignore[arg-type]
                     shell=Shell(log), log=log, rng=random.Random(0))
    ctx.ckpt_dir.mkdir()
    yield ctx
    ctx.ledger.revert(ctx.shell)
    assert not os.path.ismount(ctx.ckpt_dir)


def write(path: Path, n: int) -> None:
    with open(path, "wb") as fh:
        fh.write(b"x" * n)
        fh.flush()
        os.fsync(fh.fileno())


@needs_root
@pytest.mark.parametrize("fs", ["tmpfs", "ext4"])
def test_storage_full_fills_to_enospc_and_revert_frees(run: RunContext, fs: str) -> None:
    fault = StorageFull(StorageFullConfig(fs=fs, size_mb=8), 0)
    fault.check(run)
    fault.prepare(run)
    assert os.path.ismount(run.ckpt_dir)
    write(run.ckpt_dir / "before.pt", 1000)
    details = fault.inject(run)
    assert details["free_bytes"] < 64 << 10 and details["ballast_bytes"] > 4 << 20
    with pytest.raises(OSError) as exc:
        write(run.ckpt_dir / "save.pt", 1 << 20)
    assert exc.value.errno == errno.ENOSPC
    assert fault.revert(run) == []
    write(run.ckpt_dir / "save.pt", 1 << 20)
    # The end of the run: the checkpoints survive the unmount, in the plain directory underneath.
    run.ledger.revert(run.shell)
    assert not os.path.ismount(run.ckpt_dir)
    assert sorted(p.name for p in run.ckpt_dir.iterdir()) == ["before.pt", "save.pt"]


@needs_root
def test_read_only_then_back(run: RunContext) -> None:
    fault = ReadOnlyStorage(ReadOnlyStorageConfig(fs="tmpfs", size_mb=8), 1)
    fault.prepare(run)
    fault.inject(run)
    with pytest.raises(OSError) as exc:
        write(run.ckpt_dir / "x", 10)
    assert exc.value.errno == errno.EROFS
    assert fault.revert(run) == []
    write(run.ckpt_dir / "x", 10)


@needs_root
def test_two_storage_faults_share_one_mount_and_must_agree(run: RunContext) -> None:
    StorageFull(StorageFullConfig(size_mb=8), 0).prepare(run)
    ReadOnlyStorage(ReadOnlyStorageConfig(size_mb=8), 1).prepare(run)
    with pytest.raises(FaultError, match="different checkpoint mounts"):
        ReadOnlyStorage(ReadOnlyStorageConfig(size_mb=16), 2).prepare(run)


@needs_root
def test_refuses_to_hide_existing_files(run: RunContext) -> None:
    (run.ckpt_dir / "precious").write_text("x")
    with pytest.raises(FaultError, match="not empty"):
        StorageFull(StorageFullConfig(size_mb=8), 0).prepare(run)


def test_without_root_the_error_says_how(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(CapabilityError, match="needs root: run 'chaos run' as root"):
        check_can_mount("tmpfs")
