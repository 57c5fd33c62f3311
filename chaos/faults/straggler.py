"""Slow a rank down by duty-cycled SIGSTOP/SIGCONT (a straggler: a thermally throttled GPU, a noisy neighbour)."""

from __future__ import annotations

import signal as _signal
import threading
from typing import Any, Callable, Literal

import psutil
from pydantic import Field

from chaos.runtime.context import RunContext
from chaos.faults.base import Fault, FaultConfig
from chaos.faults.kill_rank import remote, resume_later, select_workers


class StragglerConfig(FaultConfig):
    rank: int | Literal["random"] = 0
    """Global rank to slow down: a number or 'random' (drawn from the experiment's seed)."""
    node: str | None = None
    """Only consider workers on this node (multi-node targets); default any node."""
    stopped_fraction: float = Field(default=0.5, gt=0, lt=1)
    """Share of each period the rank spends stopped: 0.5 makes it run at about half speed."""
    period_s: float = Field(default=0.2, ge=0.01, le=60)
    """Length of one stop+run cycle; shorter is smoother, longer looks like periodic stalls."""


class DutyCycle:
    """A background thread that stops and resumes one process until told to stop or the process ends.

    ``wait`` is injectable (an Event's wait by default) so tests need not sleep.
    """

    def __init__(self, proc: psutil.Process, stopped_s: float, running_s: float,
                 wait: Callable[[float], bool] | None = None) -> None:
        self.proc = proc
        self.stopped_s = stopped_s
        self.running_s = running_s
        self._stop = threading.Event()
        self._wait = wait or self._stop.wait
        self.cycles = 0
        self._thread = threading.Thread(target=self._loop, name=f"straggler-{proc.pid}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _loop(self) -> None:
        try:
            while not self._stop.is_set():
                self.proc.send_signal(_signal.SIGSTOP)
                if self._wait(self.stopped_s):
                    break
                self.proc.send_signal(_signal.SIGCONT)
                self.cycles += 1
                if self._wait(self.running_s):
                    break
        except psutil.NoSuchProcess:
            return  # the rank died (a restart): nothing left to slow down
        finally:
            try:
                self.proc.send_signal(_signal.SIGCONT)
            except psutil.NoSuchProcess:
                pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)


class Straggler(Fault, kind="straggler"):
    """Slow a rank down by duty-cycled SIGSTOP/SIGCONT (a straggler: a thermally throttled GPU, a noisy neighbour)."""

    Config = StragglerConfig

    def plan(self, run: RunContext) -> list[str]:
        c = self.config
        return [f"every {c.period_s:g} s: kill -STOP <rank {c.rank}>, {c.stopped_fraction * c.period_s:g} s later "
                f"kill -CONT; until duration_s or the run ends (follows that process, not its restarts)"]

    def _cycles(self, run: RunContext) -> list[Any]:
        # This fault's own duty cycles, kept on the instance that injected them until it reverts them.
        if not hasattr(self, "_duty_cycles"):
            self._duty_cycles: list[Any] = []
        return self._duty_cycles

    def inject(self, run: RunContext) -> dict[str, Any]:
        c = self.config
        workers = select_workers(run, c.rank, c.node)
        w = workers[0]
        run.ledger.push(self.owner, resume_later(run, w))
        stopped_s, running_s = c.stopped_fraction * c.period_s, (1 - c.stopped_fraction) * c.period_s
        if remote(run):
            # A step on the rank's node runs the cycle there (chaos/slurm/steps.py).
            self._cycles(run).append(run.target.slow(run, w, stopped_s, running_s))  # type: ignore[attr-defined]
        else:
            cycle = DutyCycle(psutil.Process(w.pid), stopped_s, running_s)
            self._cycles(run).append(cycle)
            cycle.start()
        return {"pids": [w.pid], "ranks": [w.rank], "node": w.node, "stopped_fraction": c.stopped_fraction,
                "period_s": c.period_s}

    def revert(self, run: RunContext) -> list[Any]:
        # The thread first: a SIGCONT from the ledger would otherwise race with its next SIGSTOP.
        cycles = self._cycles(run)
        for cycle in cycles:
            cycle.stop()
        run.log("straggler_cycles", fault=self.label, cycles=[c.cycles for c in cycles])
        cycles.clear()
        return super().revert(run)
