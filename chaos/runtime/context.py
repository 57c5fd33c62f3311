"""What a fault, target or check may touch during a run: its directories, ledger, shell, processes and history."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from chaos.runtime.clock import SYSTEM, Clock
from chaos.evidence.events import History
from chaos.runtime.ledger import Ledger
from chaos.runtime.node import Node
from chaos.runtime.processes import ProcessTree, Worker
from chaos.runtime.shell import Shell

if TYPE_CHECKING:
    from chaos.spec.experiment import Experiment


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


class TargetHandle(Protocol):
    """What a run sees of its target: where the nodes live and how their ranks are started, listed and
    stopped. The contract that implements it is chaos.targets.base.Target; a target-specific fault
    (a Slurm preemption) checks the concrete class before it asks for more."""

    kind: ClassVar[str]
    nodes: list[Node]
    remote_workers: ClassVar[bool]
    independent_worlds: ClassVar[bool]

    @property
    def node_count(self) -> int: ...
    def job_node_names(self) -> list[str]: ...
    def check(self, run: "RunContext") -> None: ...
    def admit(self, run: "RunContext", kind: str, config: Any) -> None: ...
    def workers(self, run: "RunContext") -> list[Worker]: ...
    def owned_dirs(self, run: "RunContext") -> list[Path]: ...
    def plan(self, run: "RunContext") -> list[str]: ...
    def prepare(self, run: "RunContext") -> None: ...
    def launch(self, run: "RunContext") -> list[Node]: ...
    def exit_code(self) -> int | None: ...
    def stop(self, run: "RunContext") -> None: ...
    def teardown(self, run: "RunContext") -> list[Any]: ...


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
    target: TargetHandle | None = None
    """The run's target (a chaos.targets.base.Target); set before anything is prepared or launched."""
    dry_run: bool = False
    launch_no: int = 0
    clock: Clock = SYSTEM
    """The run's one clock (chaos.runtime.clock): faults stamp and wait by it, as the runner and its log do."""
    workload_env: dict[str, str] = field(default_factory=dict)
    """Environment the harness adds to every later launch of the workload (an XID source, the devices left
    after an exclusion), over the experiment's own ``workload.env``."""
    netem: bool | None = None
    """Whether this host's kernel has ``sch_netem`` (asked once per run by chaos.runtime.network)."""
    subnet: str | None = None
    """The run network's subnet, picked once by a netns or docker target."""
    ckpt_mount: Any = None
    """The size-limited checkpoint mount the storage faults share (chaos.faults.ckpt_mount.CkptMount)."""
    slowfs: int | None = None
    """The pid of the slow filesystem's daemon when slow-storage mounted one over the checkpoint directory."""
    instep_dir: Path | None = None
    """The in-step faults' command folder (chaos.instep.command), set when the run arms one: the ranks then
    start with the in-step bootstrap on their Python path."""

    @property
    def events_dir(self) -> Path:
        return self.run_dir / "events"
