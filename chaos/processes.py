"""The run's own process tree: which worker PIDs exist, their rank and attempt, and nothing outside it."""

from __future__ import annotations

from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class Worker:
    """A training worker process spawned by a torchrun agent the harness launched."""

    pid: int
    create_time: float
    rank: int | None
    local_rank: int | None
    restart_count: int
    node: str

    @property
    def key(self) -> tuple[int, float]:
        return (self.pid, self.create_time)


def _env_int(env: dict[str, str], name: str) -> int | None:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


class ProcessTree:
    """Descendants of the launcher processes, recorded as (pid, create_time) so a reused PID is never mistaken for ours."""

    def __init__(self) -> None:
        self.roots: dict[str, psutil.Process] = {}

    def add_root(self, node: str, pid: int) -> None:
        self.roots[node] = psutil.Process(pid)

    def processes(self) -> list[tuple[str, psutil.Process]]:
        out = []
        for node, root in self.roots.items():
            try:
                if not root.is_running():
                    continue
                out.append((node, root))
                out.extend((node, c) for c in root.children(recursive=True))
            except psutil.NoSuchProcess:
                continue
        return out

    def workers(self) -> list[Worker]:
        """Live worker processes: descendants whose environment carries a torchelastic RANK."""
        found = []
        for node, proc in self.processes():
            try:
                env = proc.environ()
                if "TORCHELASTIC_RESTART_COUNT" not in env or "RANK" not in env:
                    continue
                if proc.status() == psutil.STATUS_ZOMBIE:
                    continue
                found.append(Worker(
                    pid=proc.pid, create_time=proc.create_time(), rank=_env_int(env, "RANK"),
                    local_rank=_env_int(env, "LOCAL_RANK"),
                    restart_count=_env_int(env, "TORCHELASTIC_RESTART_COUNT") or 0, node=node))
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        # A worker's own children (dataloader workers) inherit RANK: keep the topmost per rank.
        pids = {w.pid for w in found}
        parents = {}
        for w in found:
            try:
                parents[w.pid] = psutil.Process(w.pid).ppid()
            except psutil.NoSuchProcess:
                parents[w.pid] = None
        return [w for w in found if parents.get(w.pid) not in pids]

    def owns(self, pid: int, create_time: float | None = None) -> bool:
        """True when ``pid`` is in the run's tree and (if given) still the same process."""
        for _node, proc in self.processes():
            if proc.pid == pid:
                try:
                    return create_time is None or abs(proc.create_time() - create_time) < 0.01
                except psutil.NoSuchProcess:
                    return False
        return False
