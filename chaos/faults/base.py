"""The fault contract: a typed config that mirrors the YAML, ``inject`` and an idempotent revert through the ledger."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from chaos.context import RunContext
from chaos.registry import FAULTS


class FaultConfig(BaseModel):
    """Fields every fault has. A fault kind subclasses this with its own fields, each documented below it."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    trigger: Any = None
    """When to inject: {at_step: N} | {after_s: S} | {on_event: EV} | {every_steps: N} | {poisson: S} | {any: [...]} | {all: [...]}, plus optional delay_s and times."""
    duration_s: float | None = Field(default=None, gt=0, le=7 * 24 * 3600)
    """Revert this many seconds after injecting; unset: revert when the run ends."""
    name: str | None = None
    """A label for reports (defaults to the kind and its index)."""
    optional: bool = False
    """The run may end without this fault having come due (a poisson draw that never came). A fault that never fired fails the run otherwise; one that fired and failed to inject always does."""


class Fault:
    """Base class. Subclass with ``kind="..."`` to register; the docstring's first line is the summary.

    ``inject`` must register every undo in ``run.ledger`` (owner ``self.owner``) *before* it acts;
    revert then replays those entries, so it is idempotent and also works from ``chaos cleanup``.
    """

    kind: ClassVar[str] = ""
    Config: ClassVar[type[FaultConfig]] = FaultConfig
    needs_target: ClassVar[tuple[str, ...]] = ()
    """Target kinds this fault works on; empty means any."""

    def __init_subclass__(cls, kind: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if kind:
            cls.kind = kind
            FAULTS.register(kind, cls)

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
