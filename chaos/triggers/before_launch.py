"""``before_launch``: fire once, after the target is prepared and before the workload starts.

A fault that is already there when the job starts: the degraded link, the full disk, the XID in the
kernel log that a pre-flight health gate is meant to find (``chaos coverage``). A fault that acts on
ranks (kill, hang, straggler) has no rank to act on yet: its injection is recorded as failed.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from chaos.triggers.base import Trigger, TriggerParams, TriggerState


class BeforeLaunchParams(TriggerParams):
    before_launch: Literal[True] = True
    """Always true: ``trigger: {before_launch: true}``."""


class BeforeLaunch(Trigger, kind="before_launch"):
    """Fire once, after the target is prepared and before the workload starts."""

    Params = BeforeLaunchParams
    shorthand = "before_launch"
    before_launch: ClassVar[bool] = True

    def __init__(self, params: BeforeLaunchParams | None = None) -> None:
        super().__init__(params)
        self._fired = False

    def __call__(self, state: TriggerState) -> bool:
        # The runner polls it once before launch; any later poll (a trigger built outside a run) fires at once too.
        if self._fired:
            return False
        self._fired = True
        return True
