"""A fault armed for a run: its trigger, its delayed and active injections, inject and revert as the
journal records them, and the ``at_step`` hold that makes a fault land at the step it asked for."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from chaos.errors import ChaosError
from chaos.evidence.fault_record import FaultRecord
from chaos.faults.base import Fault
from chaos.runtime.clock import Clock
from chaos.runtime.context import RunContext
from chaos.sdk import HOLDS_DIR
from chaos.spec.experiment import FaultSpec
from chaos.triggers.at_step import AtStep
from chaos.triggers.base import Trigger


@dataclass
class Armed:
    """A fault waiting for its trigger, and its pending (delayed) or active injections."""

    spec: FaultSpec
    fault: Fault
    trigger: Trigger
    fires: int = 0
    due: list[float] = field(default_factory=list)
    active: list[tuple[FaultRecord, float | None]] = field(default_factory=list)

    @property
    def max_fires(self) -> int | None:
        if self.spec.trigger.times is not None:
            return self.spec.trigger.times
        return None if self.trigger.repeating else 1

    def inject(self, run: RunContext, clock: Clock, t0: float, echo: Callable[[str], None]) -> FaultRecord:
        """Inject once; the record says what happened (a fault that could not act is ``failed``, not raised)."""
        rec = FaultRecord(index=self.fault.index, kind=self.fault.kind, label=self.fault.label, t_inject=clock.wall(),
                          optional=self.fault.config.optional)
        rec.details["max_step_before"] = run.history.max_step()
        rec.details["trigger"] = self.spec.trigger.describe()
        if isinstance(self.trigger, AtStep):
            rec.details["trigger_step"] = self.trigger.params.at_step  # where it asked to land (journal: landed_step)
        delay = getattr(self.trigger, "delay", None)
        if isinstance(delay, dict):  # an in_training fault that waited for a drop-replica job's groups: how long, why
            rec.details["delayed"] = delay
            echo(f"{self.fault.label} struck {delay['waited_s']:.1f} s after its due time: {delay['reason']}")
        try:
            details = self.fault.inject(run) or {}
            # A fault that first had to find its target (a listing step on a remote node) says when
            # it acted: recovery is timed from there, not from when the search began.
            acted = details.pop("t_fault", None)
            if isinstance(acted, float) and rec.t_inject <= acted <= clock.wall():
                rec.t_inject = acted
            rec.details.update(details)
            run.log("fault_inject", fault=self.fault.label, kind=self.fault.kind, index=self.fault.index,
                    t_fault=rec.t_inject, details=details, **({"delayed": delay} if isinstance(delay, dict) else {}))
            echo(f"injected {self.fault.label}: {details}")
        except ChaosError as exc:
            rec.error = str(exc)
            rec.status = "failed"
            run.log("fault_error", fault=self.fault.label, kind=self.fault.kind, index=self.fault.index, error=str(exc))
            echo(f"could not inject {self.fault.label}: {exc}")
        duration = self.fault.config.duration_s
        if duration:
            rec.details["duration_s"] = duration
        self.active.append((rec, (clock.mono() - t0) + duration if duration else None))
        return rec

    def revert(self, run: RunContext, rec: FaultRecord, clock: Clock) -> None:
        failures = self.fault.revert(run)
        rec.t_revert = clock.wall()
        rec.revert_errors = [f"{f.action}: {f.error}" for f in failures]
        run.log("fault_revert", fault=self.fault.label, kind=self.fault.kind, index=self.fault.index,
                errors=rec.revert_errors)

    def hold_path(self, run: RunContext) -> Path | None:
        """Where an ``at_step`` fault with no delay holds its step (chaos.sdk.step waits while it exists)."""
        if not isinstance(self.trigger, AtStep) or self.spec.trigger.delay_s:
            return None
        return run.run_dir / HOLDS_DIR / f"step-{self.trigger.params.at_step}"

    def arm_hold(self, run: RunContext) -> None:
        """Before launch: each rank that reports an armed ``at_step`` step waits there until the fault has
        acted, so the fault lands at the step it asked for (issue 39). Ranks that do not speak through
        chaos.sdk are not held; journal.json says where each fault landed either way."""
        path = self.hold_path(run)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()

    def release_hold(self, run: RunContext) -> None:
        path = self.hold_path(run)
        if path is not None:
            path.unlink(missing_ok=True)


def upcoming(armed: list[Armed]) -> list[tuple[str, str]]:
    """(label, trigger) of each fault that may still fire: what the live view lists as upcoming."""
    return [(a.fault.label, a.spec.trigger.describe()) for a in armed
            if a.max_fires is None or a.fires + len(a.due) < a.max_fires]
