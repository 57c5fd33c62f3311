"""Kill one, a random or all training ranks with a signal (SIGKILL by default); torchrun should restart them."""

from __future__ import annotations

import signal as _signal
from typing import Any, Literal

from pydantic import field_validator

from chaos.runtime.context import RunContext
from chaos.errors import FaultError
from chaos.faults.base import Fault, FaultConfig
from chaos.runtime.processes import Worker
from chaos.runtime.undo import Signal, Undo

# Stopping signals belong to hang-rank: a stopped rank is a hang, not a death.
_NOT_KILLS = {"SIGSTOP", "SIGTSTP", "SIGCONT", "SIGTTIN", "SIGTTOU", "SIGCHLD", "SIGWINCH", "SIGURG"}


class KillRankConfig(FaultConfig):
    rank: int | Literal["random", "all"] = 0
    """Global rank to kill: a number, 'random' (drawn from the experiment's seed) or 'all'."""
    signal: str = "SIGKILL"
    """Signal name: SIGKILL (default), SIGTERM, SIGSEGV, SIGABRT, SIGBUS, SIGINT, ..."""
    node: str | None = None
    """Only consider workers on this node (multi-node targets); default any node."""

    @field_validator("signal")
    @classmethod
    def _known_signal(cls, value: str) -> str:
        name = value.upper()
        name = name if name.startswith("SIG") else "SIG" + name
        if name in _NOT_KILLS:
            raise ValueError(f"{name} does not kill a process; use the hang-rank fault to stop a rank")
        if not hasattr(_signal, name) or not isinstance(getattr(_signal, name), _signal.Signals):
            raise ValueError(f"unknown signal '{value}'; e.g. SIGKILL, SIGTERM, SIGSEGV, SIGABRT")
        return name


def remote(run: RunContext) -> bool:
    """Whether the run's ranks are reached through the target (steps on a cluster's nodes), not the local process tree."""
    return bool(run.target is not None and run.target.remote_workers)


def current_workers(run: RunContext, node: str | None = None) -> list[Worker]:
    """Live workers of the newest attempt (the highest restart count present), optionally on one node."""
    live = run.target.workers(run) if run.target is not None else run.tree.workers()
    workers = [w for w in live if node is None or w.node == node]
    if not workers:
        return []
    if getattr(run.target, "independent_worlds", False):
        # Each node's own newest (torchft: replica group 1's relaunch is not a new round of group 0's world).
        newest_of: dict[str | None, int] = {}
        for w in workers:
            newest_of[w.node] = max(newest_of.get(w.node, 0), w.generation)
        return sorted((w for w in workers if w.generation == newest_of[w.node]), key=lambda w: (w.node or "", w.rank or 0))
    # The newest round the harness saw: restart counts differ between the nodes of one round.
    newest = max(w.generation for w in workers)
    return sorted((w for w in workers if w.generation == newest), key=lambda w: (w.rank or 0))


def select_workers(run: RunContext, rank: int | str, node: str | None = None) -> list[Worker]:
    """The workers a rank selector names; raises FaultError when none is alive."""
    workers = current_workers(run, node)
    if not workers:
        raise FaultError("no live training worker in the run's process tree to act on "
                         "(the job is between restarts or finished); trigger the fault earlier")
    if rank == "all":
        return workers
    if rank == "random":
        return [run.rng.choice(workers)]
    chosen = [w for w in workers if w.rank == rank]
    if not chosen:
        raise FaultError(f"no live worker with rank {rank}; live ranks: {[w.rank for w in workers]}")
    return chosen


def signal_workers(run: RunContext, workers: list[Worker], sig: _signal.Signals) -> list[int]:
    """Send ``sig`` to workers after re-checking each is still ours (never a reused PID)."""
    import psutil

    if remote(run):  # a step on each worker's node checks and signals there (chaos/slurm/steps.py)
        return run.target.signal(run, workers, sig)  # type: ignore[union-attr]
    hit = []
    for w in workers:
        if not run.tree.owns(w.pid, w.create_time):
            raise FaultError(f"refusing to signal pid {w.pid}: it is no longer the run's rank {w.rank} (PID reused?)")
        try:
            psutil.Process(w.pid).send_signal(sig)
            hit.append(w.pid)
        except psutil.NoSuchProcess:
            continue
    return hit


class KillRank(Fault, kind="kill-rank"):
    """Kill one, a random or all training ranks with a signal (SIGKILL by default); torchrun should restart them."""

    Config = KillRankConfig

    def plan(self, run: RunContext) -> list[str]:
        c = self.config
        return [f"kill -{c.signal.removeprefix('SIG')} <pid of rank {c.rank} in the newest attempt>"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        c = self.config
        workers = select_workers(run, c.rank, c.node)
        # Nothing to register for revert: a killed process stays killed, recovery is the job's.
        t_fault = run.clock.wall()
        pids = signal_workers(run, workers, getattr(_signal, c.signal))
        return {"t_fault": t_fault, "pids": pids, "ranks": [w.rank for w in workers if w.pid in pids], "signal": c.signal,
                "attempt": workers[0].attempt(run.launch_no)}


def resume_later(run: RunContext, w: Worker, signal: str = "SIGCONT") -> Undo:
    """The ledger entry that sends ``signal`` to ``w`` on revert, wherever the worker runs."""
    if remote(run):
        return run.target.signal_undo(run, w, signal)  # type: ignore[union-attr]
    return Signal(pid=w.pid, create_time=w.create_time, signal=signal)
