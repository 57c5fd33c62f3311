"""What a fault, target or check may touch during a run: its directories, ledger, shell, processes and history."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.clock import SYSTEM, Clock
from chaos.events import History
from chaos.ledger import Ledger
from chaos.processes import ProcessTree
from chaos.shell import Shell

if TYPE_CHECKING:
    from chaos.experiment import Experiment
    from chaos.targets.base import Target


class HarnessLog:
    """Appends the harness's own records (``launch``, ``fault_inject``, ``cmd``, ...) to harness.jsonl.

    With ``path`` None (a dry run) the records stay in memory: a dry run writes nothing to disk.
    """

    def __init__(self, path: Path | None, clock: Clock = SYSTEM) -> None:
        self.path = path
        self.clock = clock
        self.records: list[dict[str, Any]] = []
        self._pending: list[dict[str, Any]] = []
        # The witness's reader thread and a fault's repeater log too: the runner drains on its own.
        self._lock = threading.Lock()

    def __call__(self, ev: str, **fields: Any) -> dict[str, Any]:
        import json
        import os
        import socket

        record = {"ev": ev, "t": self.clock.wall(), "mono": self.clock.mono(), "pid": os.getpid(),
                  "host": socket.gethostname(), "source": "harness", **fields}
        line = json.dumps(record, default=str)
        with self._lock:
            self.records.append(record)
            # What the history gets is what harness.jsonl says (paths as strings), as a reader of the file sees it.
            self._pending.append(json.loads(line))
            if self.path is None:
                return record
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
        return record

    def drain(self) -> list[dict[str, Any]]:
        """The records logged since the last drain: how the runner's one history learns what the harness did."""
        with self._lock:
            new, self._pending = self._pending, []
        return new


@dataclass
class RunContext:
    experiment: "Experiment"
    run_dir: Path
    ckpt_dir: Path
    ledger: Ledger
    shell: Shell
    log: HarnessLog
    rng: random.Random
    history: History = field(default_factory=History)
    tree: ProcessTree = field(default_factory=ProcessTree)
    target: "Target | None" = None
    dry_run: bool = False
    launch_no: int = 0
    clock: Clock = SYSTEM
    """The run's one clock (chaos.clock): faults stamp and wait by it, as the runner and its log do."""
    scratch: dict[str, Any] = field(default_factory=dict)
    """Per-run state a fault or target shares with its later calls (e.g. a mount point)."""

    @property
    def events_dir(self) -> Path:
        return self.run_dir / "events"
