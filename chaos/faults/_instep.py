"""What the in-step faults share: the command folder, the bootstrap on the ranks' path, and the write/remove
pair that arms and reverts them (chaos.instep has the rank side)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field

from chaos.errors import CapabilityError
from chaos.faults.base import Fault, FaultConfig
from chaos.instep.command import Command, path_of, write
from chaos.runtime.context import RunContext
from chaos.runtime.undo import RemovePath

FOLDER = "instep"


class InStepConfig(FaultConfig):
    rank: int | Literal["all"] = Field(default=0)
    """Global rank it acts on, or 'all' (torchft's replica groups are numbered one after another: group g's rank r
    is g * nproc_per_node + r)."""
    steps: int | None = Field(default=1, ge=1, le=1_000_000)
    """How many steps it acts on each rank (once by default); null: every step until it is reverted
    (``duration_s``) or the run ends: a persistent fault, such as a failing GPU."""


class InStepFault(Fault):
    """Base of the faults that act inside the training step; a subclass says what it writes in its command."""

    in_step = True
    named_by: ClassVar[tuple[str, ...]] = ()
    """The ``code`` s of a health event that names this fault's class (the guard's ``nonfinite``, the replica
    check's ``sdc``, a stack's ``oom``): what the detection check accepts as the job naming it, besides
    aborting. Recorded with the injection, so the journal says what would have named it."""

    def command(self) -> Command:
        raise NotImplementedError

    def check(self, run: RunContext) -> None:
        world = run.experiment.workload.nproc_per_node * run.experiment.target.node_count()
        rank = self.config.rank  # type: ignore[attr-defined]
        if isinstance(rank, int) and not 0 <= rank < world:
            raise CapabilityError(f"{self.label}: rank {rank} does not exist in a world of {world} ranks "
                                  f"(nproc_per_node x nodes); pick 0..{world - 1} or 'all'")

    def prepare(self, run: RunContext) -> None:
        # Before launch: the ranks start with the bootstrap on their path only when a fault will need it.
        # Absolute: the ledger's undo refuses any path it cannot place inside the run's directories.
        folder = (run.run_dir / FOLDER).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        run.instep_dir = folder

    def plan(self, run: RunContext) -> list[str]:
        cmd = self.command()
        who = "every rank" if cmd.ranks is None else f"rank {cmd.ranks[0]}"
        steps = "every step until reverted" if cmd.steps is None else f"{cmd.steps} step(s)"
        return [f"{self.kind}: on {who}, {cmd.where}, for {steps} ({cmd.params}); acts from the first step "
                f"after the trigger, through the in-step bootstrap on the ranks' PYTHONPATH"]

    def inject(self, run: RunContext) -> dict[str, Any]:
        folder = run.instep_dir if run.instep_dir is not None else (run.run_dir / FOLDER).resolve()
        cmd = self.command()
        # The undo first: a revert stops a persistent fault, and a crash of the harness leaves no command
        # behind for a later attempt of the job to pick up.
        run.ledger.push(self.owner, RemovePath(path_of(str(folder), cmd.index)))
        write(str(folder), cmd)
        return {"command": path_of(str(folder), cmd.index), "where": cmd.where,
                "ranks": "all" if cmd.ranks is None else cmd.ranks, "steps": cmd.steps,
                "named_by": list(self.named_by), **cmd.params}

    def _ranks(self) -> list[int] | None:
        rank = self.config.rank  # type: ignore[attr-defined]
        return None if rank == "all" else [int(rank)]
