"""Remount the run's checkpoint filesystem read-only (EROFS on every write); revert remounts it read-write."""

from __future__ import annotations

import time
from typing import Any

from pydantic import Field

from chaos.context import RunContext
from chaos.errors import FaultError
from chaos.faults.base import Fault, FaultConfig
from chaos.storage import MountOptions, check_can_mount, ensure_ckpt_mount, mounted
from chaos.undo import Command


class ReadOnlyStorageConfig(FaultConfig, MountOptions):
    busy_retry_s: float = Field(default=5.0, ge=0, le=120)
    """A remount fails with EBUSY while a file is open for writing: keep retrying this long (a save in flight finishes)."""


class ReadOnlyStorage(Fault, kind="read-only-storage"):
    """Remount the run's checkpoint filesystem read-only (EROFS on every write); revert remounts it read-write."""

    Config = ReadOnlyStorageConfig

    def check(self, run: RunContext) -> None:
        check_can_mount(self.config.fs)

    def prepare(self, run: RunContext) -> None:
        ensure_ckpt_mount(run, self.config)

    def plan(self, run: RunContext) -> list[str]:
        c = self.config
        return [f"before launch: mount a {c.size_mb} MiB {c.fs} over {run.ckpt_dir}",
                f"at the trigger: mount -o remount,ro {run.ckpt_dir}",
                f"revert: mount -o remount,rw {run.ckpt_dir}"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        path = str(mounted(run).path)
        # Only when it is read-only now: never "restore" rw on a mount someone else made ro.
        run.ledger.push(self.owner, Command(["mount", "-o", "remount,rw", path],
                                            only_if=["findmnt", "-n", "-O", "ro", "-M", path]))
        deadline = time.monotonic() + self.config.busy_retry_s
        tries = 0
        while True:
            tries += 1
            result = run.shell.run(["mount", "-o", "remount,ro", path], check=False)
            if result.ok:
                return {"path": path, "tries": tries}
            if time.monotonic() >= deadline:
                raise FaultError(f"could not remount {path} read-only after {tries} tries: "
                                 f"{result.stderr.strip() or result.stdout.strip()}")
            time.sleep(0.05)
