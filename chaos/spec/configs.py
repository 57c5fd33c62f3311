"""The config bases every experiment section and plugin extends: strict, self-documenting pydantic models.

A fault's, check's, target's or trigger's settings are a subclass of one of these, with each field
documented by the docstring below it: that docstring is what ``chaos list``, the JSON Schema and the
validation errors show. They live here, on the ground floor, because the experiment file is
validated against them before anything of a run exists; the plugin contracts (chaos.faults.base,
chaos.checks.base, chaos.targets.base) re-export them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field


class StrictConfig(BaseModel):
    """A config that refuses unknown fields (a typo is an error, not a silently ignored setting) and takes
    each field's description from the docstring below it."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class FaultConfig(StrictConfig):
    """Fields every fault has. A fault kind subclasses this with its own fields, each documented below it."""

    trigger: Any = None
    """When to inject: {at_step: N} | {after_s: S} | {on_event: EV} | {every_steps: N} | {poisson: S} | {any: [...]} | {all: [...]}, plus optional delay_s and times."""
    duration_s: float | None = Field(default=None, gt=0, le=7 * 24 * 3600)
    """Revert this many seconds after injecting; unset: revert when the run ends."""
    name: str | None = None
    """A label for reports (defaults to the kind and its index)."""
    optional: bool = False
    """The run may end without this fault having come due (a poisson draw that never came). A fault that never fired fails the run otherwise; one that fired and failed to inject always does."""


class CheckConfig(StrictConfig):
    # Fields every check has (none yet): a check kind subclasses this with its own. No docstring: it would
    # become the JSON Schema description of every check that takes no settings.
    pass


class TargetConfig(StrictConfig):
    GOLDEN_NEUTRAL: ClassVar[frozenset[str]] = frozenset()
    """Fields that shape what happens after a fault (spare capacity, how long a scheduler waits), never what a
    fault-free run computes: left out of the golden cache key, so experiments differing only in them share
    one golden run. Conservative by design: a field belongs here only when the ranks' layout cannot change."""

    def node_count(self) -> int:
        """The nodes (torchrun worlds of workload.nproc_per_node ranks each) the job starts with."""
        return max(1, int(getattr(self, "nodes", 1) or 1))

    def golden_key(self) -> dict[str, Any]:
        return self.model_dump(exclude=set(self.GOLDEN_NEUTRAL))
