"""The fault contract: a typed config that mirrors the YAML, ``inject`` and an idempotent revert through the ledger."""

from __future__ import annotations

from typing import Any, ClassVar

from chaos.runtime.context import RunContext
from chaos.registry import FAULTS, Plugin
from chaos.spec.configs import FaultConfig

__all__ = ["Fault", "FaultConfig", "summary"]


class Fault(Plugin):
    """Base class. Subclass with ``kind="..."`` to register; the docstring's first line is the summary.

    ``inject`` must register every undo in ``run.ledger`` (owner ``self.owner``) *before* it acts;
    revert then replays those entries, so it is idempotent and also works from ``chaos cleanup``.
    """

    registry = FAULTS
    Config: ClassVar[type[FaultConfig]] = FaultConfig
    needs_target: ClassVar[tuple[str, ...]] = ()
    """Target kinds this fault works on; empty means any."""
    in_step: ClassVar[bool] = False
    """The fault acts inside the training step (chaos.instep): each rank it acts on writes an ``instep`` event
    where it landed, which the checks of in-step faults judge by."""

    def __init__(self, config: FaultConfig, index: int) -> None:
        self.config = config
        self.index = index

    @property
    def owner(self) -> str:
        return f"fault/{self.index}"

    @property
    def label(self) -> str:
        return self.config.name or f"{self.kind}#{self.index}"

    def check(self, run: RunContext) -> None:
        """Raise CapabilityError (with how to fix it) if this host cannot do this fault. Runs before launch."""

    def prepare(self, run: RunContext) -> None:
        """Set up what the fault needs before the workload starts (e.g. a size-limited mount)."""

    def plan(self, run: RunContext) -> list[str]:
        """Human-readable actions (with exact commands) ``inject`` would take, for ``--dry-run``."""
        return [f"{self.kind}: {self.config.model_dump(exclude={'trigger', 'name', 'optional'}, exclude_none=True)}"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        """Do the fault; return details for the journal (targets hit, pids, paths)."""
        raise NotImplementedError

    def revert(self, run: RunContext) -> list[Any]:
        """Undo everything this fault registered; returns the failures (empty when all went well)."""
        return run.ledger.revert(run.shell, owner=self.owner)


def summary(cls: type) -> str:
    return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
