"""Fill the run's checkpoint filesystem to ENOSPC with a ballast file; revert deletes the ballast."""

from __future__ import annotations

import errno
import os
from typing import Any

from pydantic import Field

from chaos.runtime.context import RunContext
from chaos.errors import FaultError
from chaos.faults.base import FaultConfig
from chaos.faults.ckpt_mount import CkptMountFault, MountOptions, mounted
from chaos.runtime.undo import RemovePath

BALLAST_NAME = ".chaos-ballast"
_CHUNK = 1 << 20


class StorageFullConfig(FaultConfig, MountOptions):
    leave_bytes: int = Field(default=0, ge=0)
    """Bytes to leave free after filling (0: fill until the filesystem refuses a single byte more)."""


class StorageFull(CkptMountFault, kind="storage-full"):
    """Fill the run's checkpoint filesystem to ENOSPC with a ballast file; revert deletes the ballast."""

    Config = StorageFullConfig

    def plan(self, run: RunContext) -> list[str]:
        c = self.config
        return [self.mount_plan(run),
                f"at the trigger: write {run.ckpt_dir}/{BALLAST_NAME} until ENOSPC (leaving {c.leave_bytes} B)",
                f"revert: rm {run.ckpt_dir}/{BALLAST_NAME}"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        mount = mounted(run)
        ballast = mount.path / f"{BALLAST_NAME}-{self.index}"
        run.ledger.push(self.owner, RemovePath(str(ballast)))
        written = fill(ballast, self.config.leave_bytes)
        st = os.statvfs(mount.path)
        return {"path": str(ballast), "ballast_bytes": written, "free_bytes": st.f_bavail * st.f_frsize,
                "fs": mount.fs, "size_mb": mount.size_mb}


def fill(path: os.PathLike[str] | str, leave_bytes: int = 0) -> int:
    """Write zeros to ``path`` until the filesystem is full (minus ``leave_bytes``); returns bytes written.

    Real writes rather than fallocate: tmpfs and ext4 both honour them, and the workload then meets
    ENOSPC exactly as it would on a full disk. The tail is written in shrinking pieces so the last
    free blocks are taken too.
    """
    st = os.statvfs(os.path.dirname(os.path.abspath(path)))
    budget = max(0, st.f_bavail * st.f_frsize - leave_bytes) if leave_bytes else None
    zeros = bytes(_CHUNK)
    written = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        piece = _CHUNK
        while piece >= 512:
            want = piece if budget is None else min(piece, budget - written)
            if want <= 0:
                break
            try:
                n = os.write(fd, zeros[:want])
            except OSError as exc:
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise FaultError(f"filling {path} failed: {exc}") from None
                piece //= 2
                continue
            written += n
            if n < want:
                piece //= 2
        try:
            os.fsync(fd)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise FaultError(f"syncing {path} failed: {exc}") from None
    finally:
        os.close(fd)
    return written
