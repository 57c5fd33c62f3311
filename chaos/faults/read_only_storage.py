"""Remount the run's checkpoint filesystem read-only (EROFS on every write); revert remounts it read-write."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from chaos.runtime.context import RunContext
from chaos.errors import FaultError
from chaos.faults.base import FaultConfig
from chaos.faults.ckpt_mount import CkptMountFault, MountOptions, mounted
from chaos.runtime.undo import Command


class ReadOnlyStorageConfig(FaultConfig, MountOptions):
    busy_retry_s: float = Field(default=5.0, ge=0, le=120)
    """A remount fails with EBUSY while a file is open for writing: keep retrying this long (a save in flight finishes)."""


class ReadOnlyStorage(CkptMountFault, kind="read-only-storage"):
    """Remount the run's checkpoint filesystem read-only (EROFS on every write); revert remounts it read-write."""

    Config = ReadOnlyStorageConfig

    def plan(self, run: RunContext) -> list[str]:
        return [self.mount_plan(run),
                f"at the trigger: mount -o remount,ro {run.ckpt_dir}",
                f"revert: mount -o remount,rw {run.ckpt_dir}"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        path = str(mounted(run).path)
        # Only when it is read-only now: never "restore" rw on a mount someone else made ro.
        run.ledger.push(self.owner, Command(["mount", "-o", "remount,rw", path],
                                            only_if=["findmnt", "-n", "-O", "ro", "-M", path]))
        deadline = run.clock.mono() + self.config.busy_retry_s
        tries = 0
        while True:
            tries += 1
            result = run.shell.run(["mount", "-o", "remount,ro", path], check=False)
            if result.ok:
                return {"path": path, "tries": tries}
            if run.clock.mono() >= deadline:
                raise FaultError(f"could not remount {path} read-only after {tries} tries: "
                                 f"{result.stderr.strip() or result.stdout.strip()}")
            run.clock.sleep(0.05)
