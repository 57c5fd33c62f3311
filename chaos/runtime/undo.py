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

from chaos.runtime.processes import stop_processes
from chaos.runtime.shell import Shell

_OPS: dict[str, type["Undo"]] = {}


@dataclass(frozen=True)
class Scope:
    """What a run may touch: paths under its directories (run dir, checkpoint dir) and nothing else."""

    roots: tuple[Path, ...]

    def contains(self, path: str, *, allow_root: bool = False) -> bool:
        """Is ``path`` under one of the roots? The last component is not followed (a link is removed, not its target)."""
        if not isinstance(path, str) or "\0" in path or not os.path.isabs(path):
            return False  # the harness records absolute paths only; anything else was not written by it
        try:
            name = os.path.basename(path)
            p = (Path(os.path.realpath(path)) if name in ("", ".", "..")
                 else Path(os.path.realpath(os.path.dirname(path))) / name)
        except (OSError, ValueError):
            return False
        for root in self.roots:
            r = Path(os.path.realpath(root))
            if p == r:
                if allow_root:
                    return True
                continue
            if p.is_relative_to(r):
                return True
        return False


class UndoFormatError(ValueError):
    """A ledger record that is not a known undo action (a newer harness wrote it, or it was edited)."""


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

    def refusal(self, scope: Scope) -> str | None:
        """Why running this would touch something the run does not own (None: it may run)."""
        return None

    def leftover(self, shell: Shell) -> str | None:
        """What of the action is still in place (None: nothing, or nothing this undo can tell)."""
        return None

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, **asdict(self)}

    @staticmethod
    def from_json(data: Any) -> "Undo":
        if not isinstance(data, dict) or data.get("op") not in _OPS:
            raise UndoFormatError(f"not a known undo action: {str(data)[:200]}")
        data = dict(data)
        cls = _OPS[data.pop("op")]
        try:
            return cls(**data)
        except TypeError as exc:
            raise UndoFormatError(f"malformed '{cls.op}' undo action {data}: {exc}") from None


def _ancestors() -> set[int]:
    pids = {os.getpid()}
    try:
        for p in psutil.Process().parents():
            pids.add(p.pid)
    except psutil.Error:
        pass
    return pids


def pid_refusal(pid: Any, create_time: Any) -> str | None:
    """Why ``pid`` must not be signalled on the ledger's word: not a recorded, identifiable process of the run."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1:
        return f"refusing to signal pid {pid!r}: not a single process the run started"
    if not isinstance(create_time, (int, float)) or isinstance(create_time, bool):
        return f"refusing to signal pid {pid}: no start time recorded, so a reused PID could not be told apart"
    if pid in _ancestors():
        return f"refusing to signal pid {pid}: it is this harness or one of its parents"
    return None


def same_process(pid: int, create_time: float | None) -> psutil.Process | None:
    """The live process ``pid`` if it is still the one we recorded (not a reused PID, not ourselves)."""
    if pid_refusal(pid, create_time) is not None:
        return None
    try:
        proc = psutil.Process(pid)
        if abs(proc.create_time() - create_time) > 0.01:  # type: ignore[operator]
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
    timeout_s: float = 30.0
    """How long the command may take (deleting a cluster's Jobs waits for their pods to go)."""

    def run(self, shell: Shell) -> None:
        if self.only_if is not None and not shell.run(self.only_if, check=False).ok:
            return
        shell.run(self.argv, timeout=self.timeout_s)

    def describe(self) -> str:
        cmd = shlex.join(self.argv)
        return f"{shlex.join(self.only_if)} && {cmd}" if self.only_if else cmd

    def refusal(self, scope: Scope) -> str | None:
        if not self.argv or not all(isinstance(a, str) for a in self.argv):
            return f"refusing a malformed command {self.argv!r}"
        return None

    def leftover(self, shell: Shell) -> str | None:
        # The probe is how the fault said "the thing still exists"; without one nothing can be told.
        if self.only_if is not None and shell.run(self.only_if, check=False).ok:
            return f"still present ({shlex.join(self.only_if)} succeeds); undo: {self.describe()}"
        return None


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

    def refusal(self, scope: Scope) -> str | None:
        if not isinstance(getattr(signal, str(self.signal), None), signal.Signals):
            return f"refusing unknown signal {self.signal!r}"
        return pid_refusal(self.pid, self.create_time)

    def leftover(self, shell: Shell) -> str | None:
        proc = same_process(self.pid, self.create_time)
        if proc is not None and self.signal == "SIGCONT":
            try:
                if proc.status() == psutil.STATUS_STOPPED:
                    return f"pid {self.pid} is still stopped; undo: {self.describe()}"
            except psutil.NoSuchProcess:
                return None
        return None


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
        stop_processes(procs, self.grace_s)

    def describe(self) -> str:
        return f"pkill -KILL -P {self.pid}; kill -KILL {self.pid}"

    def refusal(self, scope: Scope) -> str | None:
        return pid_refusal(self.pid, self.create_time)

    def leftover(self, shell: Shell) -> str | None:
        if same_process(self.pid, self.create_time) is not None:
            return f"pid {self.pid} (launched by the run) is still running; undo: {self.describe()}"
        return None


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

    def refusal(self, scope: Scope) -> str | None:
        if not scope.contains(self.path, allow_root=True):
            return f"refusing to unmount {self.path}: not under the run's directories"
        return None

    def leftover(self, shell: Shell) -> str | None:
        return f"{self.path} is still mounted; undo: {self.describe()}" if os.path.ismount(self.path) else None


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

    def refusal(self, scope: Scope) -> str | None:
        if not scope.contains(self.path):
            return f"refusing to delete {self.path}: not inside the run's directories"
        return None

    def leftover(self, shell: Shell) -> str | None:
        return f"{self.path} still exists; undo: {self.describe()}" if os.path.lexists(self.path) else None


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

    def refusal(self, scope: Scope) -> str | None:
        for p in (self.path, self.backup):
            if not scope.contains(p):
                return f"refusing to restore {self.path} from {self.backup}: {p} is not inside the run's directories"
        return None

    def leftover(self, shell: Shell) -> str | None:
        return f"{self.path} not restored yet; undo: {self.describe()}" if os.path.exists(self.backup) else None


@dataclass
class RestoreIfUnchanged(Undo):
    """Put back a file's original bytes, but only while it is still exactly what the run left there.

    ``left`` is the xxh3-128 the run left at ``path`` ("" when it deleted the file). If the file has
    moved on since (the workload re-saved that checkpoint, or pruned its directory), writing the
    old bytes back would damage a newer file, so the backup is dropped instead. The backup may be
    on another filesystem (a checkpoint tmpfs), hence a copy and a same-directory rename.
    """

    op: ClassVar[str] = "restore_if_unchanged"
    path: str = ""
    backup: str = ""
    left: str = ""

    def run(self, shell: Shell) -> None:
        if not os.path.exists(self.backup):
            return
        target = Path(self.path)
        if self._unchanged(target) and target.parent.is_dir():
            tmp = target.with_name(f".{target.name}.chaos-restore")
            shutil.copy2(self.backup, tmp)
            os.replace(tmp, target)
        os.unlink(self.backup)

    def _unchanged(self, target: Path) -> bool:
        if not self.left:
            return not target.exists() and not target.is_symlink()
        if not target.is_file():
            return False
        from chaos.checkpoint.manifest import hash_file

        return hash_file(target) == self.left

    def describe(self) -> str:
        return (f"cp -p {shlex.quote(self.backup)} {shlex.quote(self.path)}  "
                f"# only if {self.path} is still the run's corrupted version")


@dataclass
class RemoveCgroup(Undo):
    """Remove a cgroup the run made (chaos.runtime.memcg): what is left in it goes back to its parent first."""

    op: ClassVar[str] = "rm_cgroup"
    path: str = ""

    def run(self, shell: Shell) -> None:
        p = Path(self.path)
        if not p.is_dir():
            return
        try:
            pids = (p / "cgroup.procs").read_text().split()
        except OSError:
            pids = []
        for pid in pids:
            try:
                (p.parent / "cgroup.procs").write_text(pid)
            except OSError:
                pass  # gone meanwhile
        p.rmdir()

    def describe(self) -> str:
        return (f"for p in $(cat {shlex.quote(self.path)}/cgroup.procs); do echo $p > "
                f"{shlex.quote(str(Path(self.path).parent))}/cgroup.procs; done; rmdir {shlex.quote(self.path)}")

    def refusal(self, scope: Scope) -> str | None:
        p = Path(self.path)
        if not (p.is_absolute() and p.is_relative_to("/sys/fs/cgroup") and p.name.startswith("chaos-")
                and ".." not in p.parts):
            return f"refusing to remove cgroup {self.path}: not a chaos-* cgroup under /sys/fs/cgroup"
        return None

    def leftover(self, shell: Shell) -> str | None:
        return f"cgroup {self.path} still exists; undo: {self.describe()}" if os.path.isdir(self.path) else None
