"""A RunContext for an experiment with one xid fault, without launching anything (imported, not a conftest: other suites import their own `conftest` by name)."""

import random
from pathlib import Path
from typing import Any, Callable

import pytest

from chaos.runtime.context import HarnessLog, RunContext
from chaos.spec.load import load_experiment
from chaos.run.plugins import build_fault
from chaos.runtime.ledger import Ledger
from chaos.runtime.shell import Shell

EXPERIMENT = """
name: t
workload: {{script: {script}, nproc_per_node: {nproc}{env}}}
faults:
  - {{kind: xid, trigger: {{at_step: 1}}, {fault}}}
"""


class FakeTarget:
    node_count = 1
    kind = "local"

    def __init__(self) -> None:
        self.launches: list[tuple[int, int, dict]] = []

    def launch(self, run: RunContext) -> None:
        self.launches.append((run.launch_no, run.experiment.workload.nproc_per_node,
                              dict(run.workload_env)))


@pytest.fixture
def make_run(tmp_path: Path) -> Callable[..., RunContext]:
    script = tmp_path / "train.py"
    script.write_text("")

    def make(fault: str = "code: 79, device: 1", nproc: int = 2, env: str = "") -> RunContext:
        text = EXPERIMENT.format(script=script, nproc=nproc, fault=fault, env=f", env: {env}" if env else "")
        exp = load_experiment(tmp_path / "t.yaml", text=text)
        run_dir = tmp_path / "run"
        run_dir.mkdir(exist_ok=True)
        log = HarnessLog(run_dir / "harness.jsonl")
        run = RunContext(experiment=exp, run_dir=run_dir, ckpt_dir=run_dir / "ckpt", ledger=Ledger(run_dir),
                         shell=Shell(log), log=log, rng=random.Random(0))
        run.target = FakeTarget()  # type: ignore[assignment]
        return run

    return make


def fault_of(run: RunContext) -> Any:
    return build_fault(run.experiment.faults[0])
