"""The run's own process tree: which worker PIDs exist, their rank and attempt, and nothing outside it."""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, replace

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
    launch: int | None = None
    """CHAOS_LAUNCH in the worker's environment; a scheduler target raises it per requeue (None: not set)."""
    generation: int = 0
    """Which round of workers the harness saw this one in (ProcessTree numbers them from 1)."""

    @property
    def key(self) -> tuple[int, float]:
        return (self.pid, self.create_time)

    def attempt(self, default_launch: int) -> str:
        """The attempt id the worker's events carry (chaos.sdk.attempt_id): ``launch.restart_count``."""
        return f"{default_launch if self.launch is None else self.launch}.{self.restart_count}"



def _env_int(env: dict[str, str], name: str) -> int | None:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def _child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` from /proc/PID/task/*/children (each thread lists what it forked)."""
    out: list[int] = []
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as f:
                out.extend(int(x) for x in f.read().split())
        except OSError:  # the thread or the process is gone: its children are found through their new parent
            continue
    return out


# /proc/PID/task/TID/children needs CONFIG_PROC_CHILDREN (on in Debian's and most distributions'
# kernels). Without it psutil's walk is used, which reads /proc/*/stat of every process on the host.
PROC_CHILDREN = os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children")

NEGATIVE_CACHE_AFTER_S = 2.0
"""A descendant is remembered as "not a worker" only once it is this old: between fork and exec a
new worker still carries its parent's environment, and must be looked at again after the exec."""


class ProcessTree:
    """Descendants of the launcher processes, recorded as (pid, create_time) so a reused PID is never mistaken for ours.

    ``workers()`` runs every poll of the run loop (20 times a second), so it reads only the run's own
    tree (not every process on the host, as psutil's recursive ``children()`` does) and a process's
    environment once: a worker's RANK and restart count do not change after its exec.
    """

    def __init__(self) -> None:
        self.roots: dict[str, list[psutil.Process]] = {}
        self._seen: dict[tuple[int, float], Worker | None] = {}
        self.generation = 0
        """The newest round of workers: a round starts when a worker appears while none of the last one lives."""
        self._members: set[tuple[int, float]] = set()
        self.independent_nodes = False
        """Each node's workers make rounds of their own (the replica groups of a drop-replica job, chaos.targets.torchft,
        restart apart: one group's new worker is not a new round of the groups that never stopped)."""
        self._node_rounds: dict[str, tuple[int, set[tuple[int, float]]]] = {}

    def add_root(self, node: str, pid: int) -> None:
        """Another root of ``node``'s processes. A node's earlier roots are kept while they run: a Kubernetes pod
        evicted from an unreachable node runs on (nothing can stop it until that node's kubelet is back) beside its
        replacement, and both are the node's; dropping the first would report its workers gone while they train."""
        new = psutil.Process(pid)
        live = [r for r in self.roots.get(node, []) if not exited(r) and r != new]  # psutil: same pid and start
        self.roots[node] = live + [new]

    def _descendants(self, root: psutil.Process) -> list[psutil.Process]:
        if not PROC_CHILDREN:
            return root.children(recursive=True)
        out: list[psutil.Process] = []
        stack = [root.pid]
        while stack:
            for pid in _child_pids(stack.pop()):
                try:
                    out.append(psutil.Process(pid))
                except psutil.NoSuchProcess:
                    continue
                stack.append(pid)
        return out

    def processes(self) -> list[tuple[str, psutil.Process]]:
        out = []
        for node, root in ((n, r) for n, rs in self.roots.items() for r in rs):
            try:
                if not root.is_running():
                    continue
                out.append((node, root))
                out.extend((node, c) for c in self._descendants(root))
            except psutil.NoSuchProcess:
                continue
        return out

    def _identify(self, node: str, proc: psutil.Process) -> Worker | None:
        key = (proc.pid, proc.create_time())
        if key in self._seen:
            return self._seen[key]
        env = proc.environ()
        worker = None
        if "TORCHELASTIC_RESTART_COUNT" in env and "RANK" in env:
            worker = Worker(pid=proc.pid, create_time=key[1], rank=_env_int(env, "RANK"),
                            local_rank=_env_int(env, "LOCAL_RANK"),
                            restart_count=_env_int(env, "TORCHELASTIC_RESTART_COUNT") or 0, node=node,
                            launch=_env_int(env, "CHAOS_LAUNCH"))
        if worker is not None or time.time() - key[1] > NEGATIVE_CACHE_AFTER_S:
            self._seen[key] = worker
        return worker

    def workers(self) -> list[Worker]:
        """Live worker processes: descendants whose environment carries a torchelastic RANK."""
        found: list[Worker] = []
        parents: dict[int, int] = {}
        listed = self.processes()
        walked = {proc.pid for _node, proc in listed}
        for node, proc in listed:
            try:
                worker = self._identify(node, proc)
                if worker is None:
                    continue
                with proc.oneshot():
                    if proc.status() == psutil.STATUS_ZOMBIE:
                        continue
                    parents[proc.pid] = proc.ppid()
                found.append(worker)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        # A worker's own children (dataloader workers) inherit RANK: keep the topmost per rank. So does a daemon a worker
        # starts (NVRx's in-process monitor forks twice and the middle process exits at once): walked while still in
        # the tree, it is reparented to init by the time its parent is read. A worker's parent is in the run's tree.
        pids = {w.pid for w in found}
        out = []
        for w in found:
            if parents.get(w.pid) in pids:
                continue
            if w.generation == 0 and parents.get(w.pid) not in walked:
                self._seen[w.key] = None  # left the run's tree before it was ever a worker: never one of it
                continue
            out.append(w)
        return self._number_rounds(out)

    def _number_rounds(self, live: list[Worker]) -> list[Worker]:
        """Give each newly seen worker its round (see ``History.align_attempts`` for why)."""
        new = [w for w in live if w.generation == 0]
        if not new:
            return live
        if self.independent_nodes:
            return self._number_node_rounds(live)
        if not self._members & {w.key for w in live}:
            self.generation += 1
            self._members = set()
        out = []
        for w in live:
            if w.generation == 0:
                w = replace(w, generation=self.generation)
                self._seen[w.key] = w
                self._members.add(w.key)
            out.append(w)
        return out

    def _number_node_rounds(self, live: list[Worker]) -> list[Worker]:
        """``_number_rounds`` per node: a node's round starts when one of its workers appears while none of its last
        round lives; the numbers stay unique across nodes (the runner and the history key rounds by number)."""
        keys = {w.key for w in live}
        out = []
        for w in live:
            if w.generation == 0:
                gen, members = self._node_rounds.get(w.node, (0, set()))
                if not members & keys:
                    self.generation += 1
                    gen, members = self.generation, set()
                members.add(w.key)
                self._node_rounds[w.node] = (gen, members)
                w = replace(w, generation=gen)
                self._seen[w.key] = w
            out.append(w)
        return out

    def owns(self, pid: int, create_time: float | None = None) -> bool:
        """True when ``pid`` is in the run's tree and (if given) still the same process."""
        for _node, proc in self.processes():
            if proc.pid == pid:
                try:
                    return create_time is None or abs(proc.create_time() - create_time) < 0.01
                except psutil.NoSuchProcess:
                    return False
        return False


def exited(proc: psutil.Process) -> bool:
    """The process has ended: gone, its PID reused, or a zombie (it holds nothing but its PID until
    its parent reaps it)."""
    try:
        return not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False


def wait_exited(procs: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Wait until every process has ended (``exited``); returns those still running at the timeout.

    Unlike ``psutil.wait_procs``, which waits for a process we did not start to disappear, a zombie
    counts as ended: a killed worker whose agent died with it is reparented to init and waits there to
    be reaped, which some hosts' init does only about once a second (1.1-1.4 s measured on the 2-core
    box, whose PID 1 is not a full init), and stopping a run would wait for that each time."""
    deadline = time.monotonic() + timeout_s
    alive = list(procs)
    interval = 0.005
    while True:
        alive = [p for p in alive if not exited(p)]
        left = deadline - time.monotonic()
        if not alive or left <= 0:
            return alive
        time.sleep(min(interval, left))
        interval = min(interval * 2, 0.05)


def stop_processes(procs: list[psutil.Process], grace_s: float) -> None:
    """SIGTERM every process (SIGCONT first: a stopped one cannot act on it), SIGKILL what is left after
    ``grace_s``, and wait up to ``grace_s`` more for those to end."""
    for p in procs:
        try:
            p.send_signal(signal.SIGCONT)
            p.terminate()
        except psutil.NoSuchProcess:
            pass
    for p in wait_exited(procs, grace_s):
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass
    wait_exited(procs, grace_s)
