"""One node of a run: its name, its address on the run's network, and the torchrun agent running there."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Node:
    """One node of the run: its name, its address on the run's network (if any), and its agent process."""

    name: str
    rank: int
    address: str | None = None
    proc: subprocess.Popen | None = None
    info: dict[str, Any] = field(default_factory=dict)

    def poll(self) -> int | None:
        return None if self.proc is None else self.proc.poll()
