"""NVIDIA Resiliency Extension's own fault injector (``inprocess.tools.inject_fault``), fired on one rank by the harness.

NVRx ships a seeded fault source for testing its restarts (an exception raised asynchronously into the main
thread, a signal, SIGKILL/TERM/STOP, a segfault, the GIL held, an abort): what the framework's authors test
it with. This fault makes the harness the one that decides when and where: at the trigger, the chosen rank's
in-step bootstrap hands the kind to NVRx's own ``dispatch_fault_injection``, whose thread sleeps ``delay_s``
and then acts wherever the rank's main thread is (inside the step, inside NVRx's own monitoring), exactly as
``inject_fault`` does when a script calls it. Judging the recovery against the harness's own faults (kill-rank,
collective-error, hang-rank) shows whether the framework survives its own faults and the real ones alike.

Needs ``nvidia-resiliency-ext`` in the ranks' Python (the ``nvrx`` extra); the GPU kinds need CUDA and are
not offered.
"""

from __future__ import annotations

import importlib.util
from typing import Literal

from pydantic import Field

from chaos.errors import CapabilityError
from chaos.faults._instep import InStepConfig, InStepFault
from chaos.instep.command import Command
from chaos.runtime.context import RunContext

NvrxKind = Literal["ASYNC_EXC", "SIGNAL_EXC", "WORKLOAD_EXC", "LOCK_GIL", "SEGFAULT", "OS_ABORT",
                   "SIGKILL", "SIGTERM", "SIGINT", "SIGSTOP"]


class NvrxFaultConfig(InStepConfig):
    fault: NvrxKind = "ASYNC_EXC"
    """The member of NVRx's ``inject_fault.Fault`` to fire: ASYNC_EXC raises its InjectedException asynchronously
    in the main thread (wherever it is then), SIGNAL_EXC raises it from a signal handler, WORKLOAD_EXC raises it
    where the script calls ``maybe_raise_workload_exception()``, LOCK_GIL holds the GIL, SEGFAULT/OS_ABORT end the
    process, SIGKILL/SIGTERM/SIGINT/SIGSTOP signal it."""
    delay_s: float = Field(default=0.05, ge=0, le=3600)
    """NVRx's own delay: its injector thread sleeps this long after the rank picked the command up (at a step
    boundary), so the fault lands in the middle of the next step, not at the boundary."""
    steps: int | None = Field(default=1, ge=1, le=1)
    """Fired once: NVRx's injector acts once per call."""


class NvrxFault(InStepFault, kind="nvrx-fault"):
    """NVIDIA Resiliency Extension's own fault injector (``inprocess.tools.inject_fault``), fired on one rank by the harness."""

    Config = NvrxFaultConfig

    def check(self, run: RunContext) -> None:
        super().check(run)
        if importlib.util.find_spec("nvidia_resiliency_ext") is None:
            raise CapabilityError(f"{self.label}: NVIDIA Resiliency Extension is not installed in this Python "
                                  f"(pip install -e '.[nvrx]'); the fault fires NVRx's own injector on the rank")

    def command(self) -> Command:
        c: NvrxFaultConfig = self.config  # type: ignore[assignment]
        return Command(index=self.index, kind=self.kind, where="nvrx", ranks=self._ranks(), steps=1,
                       params={"fault": c.fault, "delay_s": c.delay_s})
