"""A run context whose shell only records (dry run) and whose ledger pushes land in the same sequence."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest

from chaos.runtime.context import HarnessLog, RunContext
from chaos.runtime.ledger import Ledger
from chaos.runtime.shell import Shell
from chaos.targets.base import Node, Target


class RecordingLedger(Ledger):
    def __init__(self, run_dir: Path, seq: list[tuple[str, Any]]) -> None:
        super().__init__(run_dir)
        self.seq = seq

    def push(self, owner: str, undo: Any) -> int:
        self.seq.append(("undo", undo.describe()))
        return super().push(owner, undo)


class FakeNetTarget(Target):
    """Two nodes with addresses and namespaces, nothing real behind them."""

    def __init__(self) -> None:
        super().__init__(None)  # type: ignore[arg-type]
        self.nodes = [Node(name=f"node{k}", rank=k, address=f"10.200.1.{10 + k}",
                           info={"ifname": f"chnabcdefn{k}", "net_exec": ["ip", "netns", "exec", f"chaos-abcdef-n{k}"]})
                      for k in range(3)]


@pytest.fixture
def net_run(tmp_path: Path) -> tuple[RunContext, list[tuple[str, Any]]]:
    seq: list[tuple[str, Any]] = []
    log = HarnessLog(tmp_path / "harness.jsonl")

    def record(ev: str, **fields: Any) -> None:
        if ev == "cmd":
            seq.append(("cmd", fields["cmdline"]))
        log(ev, **fields)

    run = RunContext(experiment=None, run_dir=tmp_path, ckpt_dir=tmp_path / "ckpt",  # type: ignore[arg-type]
                     ledger=RecordingLedger(tmp_path, seq), shell=Shell(record, dry_run=True), log=log,
                     rng=random.Random(0))
    run.target = FakeNetTarget()
    return run, seq
