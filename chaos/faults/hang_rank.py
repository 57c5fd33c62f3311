"""Freeze a rank with SIGSTOP (a hung collective as its peers see it); SIGCONT after duration_s, or when the run ends."""

from __future__ import annotations

import signal as _signal
from typing import Any, Literal

from chaos.runtime.context import RunContext
from chaos.faults.base import Fault, FaultConfig
from chaos.faults.kill_rank import resume_later, select_workers, signal_workers


class HangRankConfig(FaultConfig):
    rank: int | Literal["random", "all"] = 0
    """Global rank to freeze: a number, 'random' (drawn from the experiment's seed) or 'all'."""
    node: str | None = None
    """Only consider workers on this node (multi-node targets, e.g. node1); default any node."""


class HangRank(Fault, kind="hang-rank"):
    """Freeze a rank with SIGSTOP (a hung collective as its peers see it); SIGCONT after duration_s, or when the run ends."""

    Config = HangRankConfig

    def plan(self, run: RunContext) -> list[str]:
        c = self.config
        then = f"kill -CONT after {c.duration_s:g} s" if c.duration_s else "kill -CONT when the run ends"
        return [f"kill -STOP <pid of rank {c.rank} in the newest attempt>; {then}"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        workers = select_workers(run, self.config.rank, self.config.node)
        for w in workers:
            run.ledger.push(self.owner, resume_later(run, w))
        t_fault = run.clock.wall()
        pids = signal_workers(run, workers, _signal.SIGSTOP)
        return {"t_fault": t_fault, "pids": pids, "ranks": [w.rank for w in workers if w.pid in pids],
                "nodes": sorted({w.node for w in workers}), "attempt": workers[0].attempt(run.launch_no)}
