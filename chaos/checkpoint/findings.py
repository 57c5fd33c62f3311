"""What the checkpoint verifier finds, and the names it finds them by: the ``Report`` of one checkpoint (or a
root of several), the files each format's save writes last, and a checkpoint entry's step."""

from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chaos.errors import UsageError

DCP_METADATA = ".metadata"
DCP_SHARD_SUFFIX = ".distcp"
STEP_ENTRY = re.compile(r"^(?:step|checkpoint)[_-]?(\d+)(\.[A-Za-z0-9]+)?$")
"""A checkpoint's entry in its root: ``step_N`` (this harness's workloads), ``checkpoint-N`` (HF Trainer)."""
HF_TRAINER_STATE = "trainer_state.json"
ACCELERATE_DONE = "random_states_0.pkl"
"""Accelerate's ``save_state`` writes each process's RNG state after the model, optimizer, scheduler and
loader states: process 0's is the nearest thing to a completion record its directories have."""
HF_WEIGHTS = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json",
              "adapter_model.safetensors", "adapter_model.bin")
TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


class UnusableInput(UsageError):
    """The path is not something the verifier can judge (missing, unreadable, not a checkpoint): exit 2."""


@dataclass
class Report:
    """The verdict on one checkpoint (or a root of several): what it is, and every problem found."""

    path: str
    kind: str
    """manifest | dcp | torch-save | torch-save-dir | hf-trainer | accelerate | root"""
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Facts that are not problems (what was not checked and why, in-progress saves skipped)."""
    files: int = 0
    bytes: int = 0
    seconds: float = 0.0
    step: int | None = None
    children: list["Report"] = field(default_factory=list)
    latest: str | None = None
    """For a root: the entry ``latest`` names (as written in the pointer)."""

    @property
    def ok(self) -> bool:
        return not self.problems and all(c.ok for c in self.children)

    def all_problems(self) -> list[str]:
        """Own problems, then each child's prefixed with its name."""
        out = list(self.problems)
        for child in self.children:
            out += [f"{Path(child.path).name}: {p}" for p in child.all_problems()]
        return out

    def summary(self) -> str:
        """One line: what is wrong (first problems), for check reasons and logs."""
        problems = self.all_problems()
        if not problems:
            return "valid"
        more = f" (+{len(problems) - 3} more)" if len(problems) > 3 else ""
        return "; ".join(problems[:3]) + more

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["ok"] = self.ok
        data["children"] = [c.to_json() for c in self.children]
        return data
ACCELERATE_PARTS = re.compile(r"^(?:random_states|custom_checkpoint)_\d+\.pkl$")
"""Files one save writes per process (RNG states) and per registered object (after the RNG states)."""


def accelerate_gaps(path: Path) -> list[str]:
    """Per-process and per-object files that this ``save_state`` directory lacks and a finished sibling has.

    The objects registered with ``register_for_checkpointing`` are written after the RNG states,
    so a save killed among them has every file ``ACCELERATE_DONE`` looks for. Only the number of
    objects tells it apart, and the directories beside it, written by the same loop, know it."""
    try:
        own = {p.name for p in path.iterdir()}
        siblings = [e for e in path.parent.iterdir() if e != path and e.is_dir() and (e / ACCELERATE_DONE).exists()]
    except OSError:
        return []
    gaps: dict[str, str] = {}  # the missing file -> the first sibling that has it
    for sibling in sorted(siblings, key=lambda e: step_of(e) or 0):
        for name in sorted(n for n in os.listdir(sibling) if ACCELERATE_PARTS.match(n) and n not in own):
            gaps.setdefault(name, sibling.name)
    return [f"{name} (which {where} beside it has)" for name, where in gaps.items()]


def step_of(path: Path) -> int | None:
    match = STEP_ENTRY.match(path.name)
    return int(match.group(1)) if match else None


def size_of(path: Path) -> int:
    """The file's size in bytes, -1 when it cannot be read (the formats' verifiers share it)."""
    try:
        return path.stat().st_size
    except OSError:
        return -1
