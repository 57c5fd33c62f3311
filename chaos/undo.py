"""Undo actions: small, serialisable, idempotent steps that revert what the harness did.

Every injection records its undo in the ledger *before* it acts, so a revert needs no memory of
the process that acted: ``chaos cleanup`` replays the same records after a crash.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import psutil

from chaos.shell import Shell

_OPS: dict[str, type["Undo"]] = {}


@dataclass
class Undo:
    """Base: ``run`` must be safe to call twice and must not fail when there is nothing left to undo."""

    op: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.op:
            _OPS[cls.op] = cls

    def run(self, shell: Shell) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        """A shell command an operator can run by hand to do the same."""
        raise NotImplementedError

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, **asdict(self)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> "Undo":
        data = dict(data)
        cls = _OPS[data.pop("op")]
        return cls(**data)


def same_process(pid: int, create_time: float | None) -> psutil.Process | None:
    """The live process ``pid`` if it is still the one we recorded (not a reused PID)."""
    try:
        proc = psutil.Process(pid)
        if create_time is not None and abs(proc.create_time() - create_time) > 0.01:
            return None
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


@dataclass
class Command(Undo):
    """Run a command; with ``only_if``, only when that probe command succeeds (what makes it idempotent)."""

    op: ClassVar[str] = "cmd"
    argv: list[str] = field(default_factory=list)
    only_if: list[str] | None = None

    def run(self, shell: Shell) -> None:
        if self.only_if is not None and not shell.run(self.only_if, check=False).ok:
            return
        shell.run(self.argv)

    def describe(self) -> str:
        cmd = shlex.join(self.argv)
        return f"{shlex.join(self.only_if)} && {cmd}" if self.only_if else cmd


@dataclass
class Signal(Undo):
    """Send a signal to a process we started (e.g. SIGCONT after SIGSTOP), if it is still that process."""

    op: ClassVar[str] = "signal"
    pid: int = 0
    create_time: float | None = None
    signal: str = "SIGCONT"

    def run(self, shell: Shell) -> None:
        proc = same_process(self.pid, self.create_time)
        if proc is not None:
            try:
                proc.send_signal(getattr(signal, self.signal))
            except psutil.NoSuchProcess:
                pass

    def describe(self) -> str:
        return f"kill -{self.signal.removeprefix('SIG')} {self.pid}"


@dataclass
class KillTree(Undo):
    """Kill a process we launched and every descendant (resuming stopped ones so they can die)."""

    op: ClassVar[str] = "kill_tree"
    pid: int = 0
    create_time: float | None = None
    grace_s: float = 3.0

    def run(self, shell: Shell) -> None:
        root = same_process(self.pid, self.create_time)
        if root is None:
            return
        try:
            procs = [root] + root.children(recursive=True)
        except psutil.NoSuchProcess:
            procs = [root]
        for p in procs:
            try:
                p.send_signal(signal.SIGCONT)  # a SIGSTOPped process cannot act on SIGTERM
                p.terminate()
            except psutil.NoSuchProcess:
                pass
        _gone, alive = psutil.wait_procs(procs, timeout=self.grace_s)
        for p in alive:
            try:
                p.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(alive, timeout=self.grace_s)

    def describe(self) -> str:
        return f"pkill -KILL -P {self.pid}; kill -KILL {self.pid}"


@dataclass
class Unmount(Undo):
    """Unmount a filesystem the run mounted (lazily, so a busy mount still goes)."""

    op: ClassVar[str] = "umount"
    path: str = ""

    def run(self, shell: Shell) -> None:
        if os.path.ismount(self.path):
            shell.run(["umount", "-l", self.path])

    def describe(self) -> str:
        return f"umount -l {shlex.quote(self.path)}"


@dataclass
class RemovePath(Undo):
    """Delete a file or directory the run created (ballast, images, scratch)."""

    op: ClassVar[str] = "rm"
    path: str = ""

    def run(self, shell: Shell) -> None:
        p = Path(self.path)
        if p.is_dir() and not p.is_symlink():
            shutil.rmtree(p, ignore_errors=True)
        else:
            try:
                p.unlink()
            except FileNotFoundError:
                pass

    def describe(self) -> str:
        return f"rm -rf {shlex.quote(self.path)}"


@dataclass
class RestoreFile(Undo):
    """Put back a file's original bytes from a backup the run made before changing it."""

    op: ClassVar[str] = "restore"
    path: str = ""
    backup: str = ""

    def run(self, shell: Shell) -> None:
        if os.path.exists(self.backup):
            os.replace(self.backup, self.path)

    def describe(self) -> str:
        return f"mv {shlex.quote(self.backup)} {shlex.quote(self.path)}"
