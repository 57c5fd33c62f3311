"""The command folder between the harness and the ranks: one JSON file per armed in-step fault.

Standard library only: the ranks read it at every step boundary, where the cost must stay near zero
(one ``stat`` of the folder, which changes only when a command is written or removed). The harness
writes a command whole (a rename) when the fault's trigger fires and removes it when the fault is
reverted; how many steps each rank has already applied it for is counted in ``applied/`` (one byte
per step), which outlives the rank: a fault meant for one step is not applied again by the attempt
that resumes after it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

DIR_ENV = "CHAOS_INSTEP_DIR"
"""Set on the ranks only when the run arms an in-step fault: the command folder."""
COMM_ENV = "CHAOS_INSTEP_COMM"
"""Set on the ranks when the run arms a collective-error: every DDP model registers chaos.instep.comm's hook."""
RANK_BASE_ENV = "CHAOS_RANK_BASE"
"""Set by a target whose job is several torchrun worlds side by side (torchft's replica groups, each with its own
rank 0): the first rank of this world in the run's numbering, which an in-step fault's ``rank`` uses (replica
group g's rank r is g * nproc_per_node + r), so it names one process of the run and its applied/ count is its own."""
APPLIED = "applied"


@dataclass(frozen=True)
class Command:
    index: int
    """The fault's index in the experiment (its label in reports is ``<kind>#<index>``)."""
    kind: str
    """nan, loss-spike, bitflip, oom."""
    where: str
    """What it acts on: loss, grad, param, optimizer_state, forward."""
    ranks: list[int] | None = None
    """Global ranks it acts on; None: every rank."""
    steps: int | None = 1
    """How many steps each rank applies it for; None: every step until the harness removes it (persistent)."""
    params: dict[str, Any] = field(default_factory=dict)
    """The kind's own settings (value, factor, bit, tensor, element, message)."""

    def applies_to(self, rank: int) -> bool:
        return self.ranks is None or rank in self.ranks


def path_of(folder: str, index: int) -> str:
    return os.path.join(folder, f"fault-{index}.json")


def write(folder: str, command: Command) -> str:
    """Write ``command`` whole: a rank never reads half of it."""
    os.makedirs(os.path.join(folder, APPLIED), exist_ok=True)
    path = path_of(folder, command.index)
    # Made in applied/ and renamed in: the watched folder changes once, so a rank polling its mtime cannot
    # cache the time of a half-done write and miss the command.
    tmp = os.path.join(folder, APPLIED, f".fault-{command.index}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(asdict(command), fh)
    os.replace(tmp, path)
    return path


def read_all(folder: str) -> list[Command]:
    """Every command in ``folder`` (a file being replaced or removed meanwhile is skipped)."""
    out = []
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    for name in names:
        if not (name.startswith("fault-") and name.endswith(".json")):
            continue
        try:
            with open(os.path.join(folder, name), encoding="utf-8") as fh:
                out.append(Command(**json.load(fh)))
        except (OSError, ValueError, TypeError):
            continue
    return out


def applied_path(folder: str, index: int, rank: int) -> str:
    return os.path.join(folder, APPLIED, f"fault-{index}.rank{rank}")


def applied(folder: str, index: int, rank: int) -> int:
    """How many steps ``rank`` has applied fault ``index`` for, over every attempt of the run."""
    try:
        return os.stat(applied_path(folder, index, rank)).st_size
    except FileNotFoundError:
        return 0


def count_applied(folder: str, index: int, rank: int) -> None:
    fd = os.open(applied_path(folder, index, rank), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, b".")
        os.fsync(fd)
    finally:
        os.close(fd)
