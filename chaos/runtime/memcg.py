"""A memory cgroup of the run's own: the limit the kernel's OOM killer enforces on one process, and the
cgroup's own count of the kills it made (how a host OOM is named as such, not as an anonymous SIGKILL).

Both hierarchies: cgroup v2 (``memory.max``, ``memory.events`` ``oom_kill``) and v1's memory controller
(``memory.limit_in_bytes``, ``memory.oom_control`` ``oom_kill``). The cgroup is made below the
harness's own memory cgroup (so a container's or a systemd slice's limits still hold above it) and
is always named ``chaos-...``; its undo (chaos.runtime.undo.RemoveCgroup) moves what is left in it
back to the parent and removes it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class MemCgroup:
    path: Path
    version: int
    """1: the v1 memory controller; 2: the unified hierarchy."""

    @property
    def limit_file(self) -> Path:
        return self.path / ("memory.max" if self.version == 2 else "memory.limit_in_bytes")

    def set_limit(self, limit: int) -> None:
        self.limit_file.write_text(str(int(limit)))

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(int(pid)))

    def oom_kills(self) -> int | None:
        """The kernel's count of OOM kills in this cgroup (None where the kernel does not keep one)."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            return None
        return None

    def usage(self) -> int | None:
        name = "memory.current" if self.version == 2 else "memory.usage_in_bytes"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):
            return None


def own_memory_cgroup(pid: int | str = "self") -> MemCgroup | None:
    """The memory cgroup ``pid`` is in, where this host has one this process can see."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, rel = line.split(":", 2)
        if "memory" in controllers.split(",") and (ROOT / "memory").is_dir():
            return MemCgroup(ROOT / "memory" / rel.lstrip("/"), 1)
    for line in lines:
        hier, controllers, rel = line.split(":", 2)
        if hier == "0" and controllers == "":
            base = ROOT / "unified" if (ROOT / "unified" / "cgroup.controllers").exists() else ROOT
            path = base / rel.lstrip("/")
            try:
                if "memory" in (base / "cgroup.controllers").read_text().split():
                    return MemCgroup(path, 2)
            except OSError:
                return None
    return None


def refusal() -> str | None:
    """Why a memory cgroup of the run's own cannot be made here, with what to do; None when it can."""
    if os.geteuid() != 0:
        return "a host OOM kill needs root (to make a memory cgroup and move a rank into it); run as root"
    own = own_memory_cgroup()
    if own is None:
        return ("no memory cgroup is mounted (neither cgroup v2 with the memory controller nor v1's memory "
                "hierarchy under /sys/fs/cgroup); mount one, or use the oom fault's default mode: cuda")
    if not os.access(own.path, os.W_OK):
        return f"{own.path} is not writable: a child memory cgroup cannot be made there"
    if own.version == 2:
        try:
            enabled = (own.path / "cgroup.subtree_control").read_text().split()
        except OSError:
            enabled = []
        if "memory" not in enabled:
            return (f"the memory controller is not enabled for children of {own.path} (cgroup.subtree_control); "
                    f"enable it (echo +memory > {own.path}/cgroup.subtree_control) where no process lives in "
                    f"that cgroup itself, or run the harness in a cgroup that delegates memory")
    return None
