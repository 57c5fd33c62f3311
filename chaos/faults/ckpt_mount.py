"""The size-limited checkpoint mount: a fresh tmpfs or loop-mounted ext4 over the run's checkpoint directory.

The storage faults (storage-full, read-only-storage) need the checkpoint directory on a
filesystem the harness owns, so filling it or remounting it read-only touches nothing else on the
host. The mount goes *over* ``run.ckpt_dir``, so the workload's path does not change.

When the run ends, the checkpoints are copied off the mount before it is unmounted and put back
into the (then plain) directory, so the checks and the operator see exactly what was on disk.
Every step is a ledger entry registered before the mount, so ``chaos cleanup`` undoes it too.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import Field

from chaos.spec.configs import StrictConfig
from chaos.runtime.context import RunContext
from chaos.errors import CapabilityError, FaultError
from chaos.faults.base import Fault
from chaos.runtime.undo import Command, RemovePath, Unmount

OWNER = "storage"
"""Ledger owner of the mount: reverted at the end of the run, after every fault's own revert."""

FsKind = Literal["tmpfs", "ext4"]


class MountOptions(StrictConfig):
    """The fields a storage fault adds to its config to shape the mount."""

    fs: FsKind = "tmpfs"
    """tmpfs (fast, RAM-backed) or ext4 (a loop-mounted image file: real block allocation, journal, ENOSPC semantics)."""
    size_mb: int = Field(default=64, ge=4, le=64 * 1024)
    """Size of the filesystem mounted over the checkpoint directory, in MiB."""


@dataclass
class CkptMount:
    path: Path
    fs: str
    size_mb: int
    image: Path | None = None


def check_can_mount(fs: str) -> None:
    """Raise CapabilityError unless this process can mount the filesystem kind ``fs``."""
    if os.geteuid() != 0:
        raise CapabilityError("storage faults mount a size-limited filesystem over the checkpoint directory, "
                              "which needs root: run 'chaos run' as root (sudo -E chaos run ...) or in CI (.ci/run)")
    tools = ["mount", "umount", "mountpoint", "cp"] + (["mkfs.ext4", "truncate"] if fs == "ext4" else [])
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        raise CapabilityError(f"storage faults need {', '.join(missing)}: apt-get install util-linux e2fsprogs coreutils")


def ensure_ckpt_mount(run: RunContext, options: MountOptions) -> CkptMount:
    """Mount a fresh filesystem over ``run.ckpt_dir`` (once per run; later callers share it)."""
    existing: CkptMount | None = run.ckpt_mount
    if existing is not None:
        if (existing.fs, existing.size_mb) != (options.fs, options.size_mb):
            raise FaultError(f"two storage faults ask for different checkpoint mounts ({existing.fs} "
                             f"{existing.size_mb} MiB vs {options.fs} {options.size_mb} MiB); give them the same fs and size_mb")
        return existing
    path = run.ckpt_dir.absolute()
    if os.path.ismount(path):
        raise FaultError(f"{path} is already a mount point; storage faults mount their own filesystem there. "
                         "Point workload.ckpt_dir at a plain directory")
    if any(path.iterdir()):
        raise FaultError(f"{path} is not empty; a mount over it would hide its files. "
                         "Point workload.ckpt_dir at an empty directory (or leave it unset)")
    snapshot = run.run_dir.absolute() / "ckpt-final"
    mount = CkptMount(path, options.fs, options.size_mb)
    # Undo order is the reverse of this: copy the checkpoints off, unmount, put them back, tidy up.
    run.ledger.push(OWNER, RemovePath(str(snapshot)))
    if options.fs == "ext4":
        mount.image = run.run_dir.absolute() / "ckpt.img"
        run.ledger.push(OWNER, RemovePath(str(mount.image)))
    run.ledger.push(OWNER, Command(["cp", "-a", f"{snapshot}/.", str(path)], only_if=["test", "-d", str(snapshot)]))
    run.ledger.push(OWNER, Unmount(str(path)))
    run.ledger.push(OWNER, Command(["cp", "-a", f"{path}/.", str(snapshot)], only_if=["mountpoint", "-q", str(path)]))
    if mount.image is not None:
        run.shell.run(["truncate", "-s", f"{options.size_mb}M", str(mount.image)])
        # -m 0: no blocks reserved for root, or a root workload would see ENOSPC 5% later than the ballast.
        run.shell.run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=0", str(mount.image)], timeout=60)
        run.shell.run(["mount", "-o", "loop", str(mount.image), str(path)])
        # A fresh ext4 has lost+found: move it out of the workload's way (it is not a checkpoint).
        shutil.rmtree(path / "lost+found", ignore_errors=True)
    else:
        run.shell.run(["mount", "-t", "tmpfs", "-o", f"size={options.size_mb}m,mode=0755", "chaos-ckpt", str(path)])
    run.ckpt_mount = mount
    run.log("ckpt_mount", path=str(path), fs=options.fs, size_mb=options.size_mb,
            image=str(mount.image) if mount.image else None)
    return mount


def mounted(run: RunContext) -> CkptMount:
    """The run's checkpoint mount; FaultError when prepare() did not make one."""
    mount: CkptMount | None = run.ckpt_mount
    if mount is None or not os.path.ismount(mount.path):
        raise FaultError(f"the checkpoint directory {run.ckpt_dir} is not on the harness's mount "
                         "(was the fault's prepare() skipped?)")
    return mount


class CkptMountFault(Fault):
    """Base of the storage faults: the run's checkpoint directory lives on a mount the fault sets up before launch."""

    config: MountOptions

    def check(self, run: RunContext) -> None:
        check_can_mount(self.config.fs)

    def prepare(self, run: RunContext) -> None:
        ensure_ckpt_mount(run, self.config)

    def mount_plan(self, run: RunContext) -> str:
        return f"before launch: mount a {self.config.size_mb} MiB {self.config.fs} over {run.ckpt_dir}"
