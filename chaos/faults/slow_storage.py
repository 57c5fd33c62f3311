"""Make the checkpoint filesystem slow: a bandwidth cap, added latency, or a stall of given length (FUSE passthrough).

Asynchronous saving exists because writes are slow; a test on a fast local disk never shows what it
buys or what it breaks (the writer still running when the next save comes, training reading tensors
the writer has not finished). Before launch the harness mounts a passthrough filesystem
(chaos.runtime.slowfs, FUSE) over the run's empty checkpoint directory, backed by a plain folder in
the run directory; it does nothing until the fault acts. Injecting writes the slowness into the
mount's control file; reverting (``duration_s``, or the run's end) puts the passthrough back. When the
run ends the mount goes, and the checkpoints are moved back into the plain directory, so the checks
and the operator see exactly what was written. Every step is in the ledger before it is taken, so
``chaos cleanup`` undoes it after a killed harness too. What was delayed (operations, seconds, bytes)
is logged as ``slowfs`` when the fault is reverted.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
from pydantic import Field, model_validator

from chaos.errors import CapabilityError, FaultError
from chaos.faults.base import Fault, FaultConfig
from chaos.runtime.context import RunContext
from chaos.runtime.launch import with_package
from chaos.runtime.slowfs import OPLOG_NAME
from chaos.runtime.undo import Command, KillTree, RemovePath, RestoreFile, Unmount

OWNER = "slowfs"
"""Ledger owner of the mount and its daemon: they stay until the run ends, whatever the fault's duration."""
MOUNT_WAIT_S = 15.0


class SlowStorageConfig(FaultConfig):
    write_mbps: float | None = Field(default=None, gt=0, le=100_000)
    """Cap on the bandwidth of all writes together, in MB/s (one disk or link shared by every rank)."""
    latency_ms: float = Field(default=0.0, ge=0, le=600_000)
    """Added to every write, fsync and metadata change (create, rename, unlink, mkdir)."""
    stall_s: float | None = Field(default=None, gt=0, le=86_400)
    """Every operation, reads included, blocks until this many seconds after the injection (a storage outage)."""

    @model_validator(mode="after")
    def _something_slow(self) -> "SlowStorageConfig":
        if self.write_mbps is None and not self.latency_ms and self.stall_s is None:
            raise ValueError("say how slow: write_mbps, latency_ms or stall_s")
        return self


def check_can_fuse(kind: str = "slow-storage") -> None:
    """Raise CapabilityError, with the fix, unless this process can mount the slow filesystem (for fault ``kind``)."""
    if os.geteuid() != 0:
        raise CapabilityError(f"{kind} mounts a FUSE filesystem over the checkpoint directory, which needs root: "
                              "run as root (sudo -E chaos run ...) or in CI (.ci/run)")
    if not os.path.exists("/dev/fuse") or not os.access("/dev/fuse", os.R_OK | os.W_OK):
        raise CapabilityError(f"{kind} needs /dev/fuse (the fuse kernel module; in a container: --device "
                              "/dev/fuse --cap-add SYS_ADMIN)")
    try:
        importlib.import_module("mfusepy")  # it finds libfuse as it is imported
    except ImportError:
        raise CapabilityError(f"{kind} needs mfusepy: pip install -e . (scripts/setup.sh does)") from None
    except (OSError, EnvironmentError, AttributeError) as exc:
        raise CapabilityError(f"{kind} needs libfuse ({exc}): apt-get install libfuse2 (scripts/setup.sh "
                              f"does)") from None


def mount_slowfs(run: RunContext) -> None:
    """Mount the passthrough over the run's (empty) checkpoint directory, once per run: every fault that acts
    through it (slow-storage, write-error) shares the mount and writes its part of the control when it acts."""
    mount, backing, control, stats = slowfs_paths(run)
    if run.slowfs is not None:
        return
    if run.ckpt_mount is not None:
        raise FaultError("slow-storage and write-error cannot share the checkpoint directory with storage-full or "
                         "read-only-storage (each mounts its own filesystem there); use one per experiment")
    if os.path.ismount(mount):
        raise FaultError(f"{mount} is already a mount point; point workload.ckpt_dir at a plain directory")
    if any(mount.iterdir()):
        raise FaultError(f"{mount} is not empty; a mount over it would hide its files. Point workload.ckpt_dir "
                         f"at an empty directory (or leave it unset)")
    backing.mkdir()
    control.write_text("{}\n")
    # Undo runs in reverse: unmount, stop the daemon, move the checkpoints back, tidy up.
    run.ledger.push(OWNER, RemovePath(str(backing)))
    run.ledger.push(OWNER, Command(["cp", "-a", f"{backing}/.", str(mount)], only_if=["test", "-d", str(backing)]))
    log = open(run.run_dir / "slowfs.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "chaos.runtime.slowfs", str(backing), str(mount),
                             "--control", str(control), "--stats", str(stats), "--oplog", str(oplog_path(run)), "--harness-pid", str(os.getpid())],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": with_package(os.environ.get("PYTHONPATH"))})
    log.close()
    run.ledger.push(OWNER, KillTree(pid=proc.pid, create_time=psutil.Process(proc.pid).create_time()))
    run.ledger.push(OWNER, Unmount(str(mount)))
    deadline = time.monotonic() + MOUNT_WAIT_S
    while not os.path.ismount(mount):
        if proc.poll() is not None or time.monotonic() > deadline:
            said = (run.run_dir / "slowfs.log").read_text(errors="replace")[-600:]
            raise FaultError(f"the slow filesystem did not mount over {mount} "
                             f"({'its daemon exited ' + str(proc.returncode) if proc.poll() is not None else 'timed out'}): "
                             f"{said.strip() or 'no output'}")
        time.sleep(0.02)
    run.slowfs = proc.pid
    run.log("ckpt_mount", path=str(mount), fs="slowfs", backing=str(backing), pid=proc.pid, oplog=str(oplog_path(run)))


def slowfs_paths(run: RunContext) -> tuple[Path, Path, Path, Path]:
    """The mount (the checkpoint directory), its backing folder, the control file and the stats file."""
    d = run.run_dir.absolute()
    return run.ckpt_dir.absolute(), d / "ckpt-backing", d / "slowfs-control.json", d / "slowfs-stats.json"


def oplog_path(run: RunContext) -> Path:
    """Where the daemon records every change it passes through (chaos.evidence.fs_ops reads it)."""
    return run.run_dir.absolute() / OPLOG_NAME


def set_control(run: RunContext, fault: Fault, **state: Any) -> Path:
    """Merge ``state`` into the mount's control (the daemon acts on it from its next operation); the control as
    it was is restored when ``fault`` is reverted. Returns the mount."""
    mount, _backing, control, _ = slowfs_paths(run)
    if not os.path.ismount(mount):
        raise FaultError(f"the slow filesystem is not mounted over {mount} (was prepare() skipped?)")
    backup = control.with_name(f"{control.name}.{fault.index}.orig")
    shutil.copy2(control, backup)
    run.ledger.push(fault.owner, RestoreFile(str(control), str(backup)))
    try:
        current = json.loads(control.read_text())
    except (OSError, ValueError):
        current = {}
    tmp = control.with_name(control.name + ".tmp")
    tmp.write_text(json.dumps({**current, **state}))
    os.replace(tmp, control)
    return mount


def log_slowfs_stats(run: RunContext, fault: Fault) -> None:
    """The daemon's count of what it delayed and failed, as the ``slowfs`` harness record."""
    stats = slowfs_paths(run)[3]
    try:
        # The daemon rewrites its stats as it goes; give it a moment to say the last of them.
        time.sleep(0.25)
        run.log("slowfs", fault=fault.label, index=fault.index, **json.loads(stats.read_text()))
    except (OSError, ValueError):
        pass


class ThroughSlowfs(Fault):
    """A fault that acts through the FUSE passthrough (no kind of its own): the mount before launch, the control
    written when it acts, the daemon's record of what it did when it is reverted."""

    needs_target = ("local", "netns", "slurm")

    def check(self, run: RunContext) -> None:
        check_can_fuse(self.kind)

    def acts(self) -> str:
        """What the fault writes into the control, for the plan."""
        raise NotImplementedError

    def plan(self, run: RunContext) -> list[str]:
        mount, backing, control, _ = slowfs_paths(run)
        return [f"before launch: mount {sys.executable} -m chaos.runtime.slowfs {backing} {mount} (FUSE passthrough)",
                f"at the trigger: write {control}: {self.acts()}",
                "revert: pass-through again; at the end: umount, move the checkpoints back into the directory"]

    def prepare(self, run: RunContext) -> None:
        mount_slowfs(run)

    def revert(self, run: RunContext) -> list[Any]:
        failures = super().revert(run)
        log_slowfs_stats(run, self)
        return failures


class SlowStorage(ThroughSlowfs, kind="slow-storage"):
    """Make the checkpoint filesystem slow: a bandwidth cap, added latency, or a stall of given length (FUSE passthrough)."""

    Config = SlowStorageConfig

    def acts(self) -> str:
        c = self.config
        return f"write_mbps={c.write_mbps}, latency_ms={c.latency_ms:g}, stall_s={c.stall_s}"

    def inject(self, run: RunContext) -> dict[str, Any]:
        c = self.config
        mount = set_control(run, self, write_mbps=c.write_mbps, latency_ms=c.latency_ms,
                            stall_until=time.time() + c.stall_s if c.stall_s else None)
        return {"mount": str(mount), "write_mbps": c.write_mbps, "latency_ms": c.latency_ms, "stall_s": c.stall_s,
                "mechanism": "FUSE passthrough (chaos.runtime.slowfs)"}
