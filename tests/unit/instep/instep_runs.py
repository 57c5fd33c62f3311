"""A run context (not launched) over an experiment of two ranks with one in-step fault, for the in-step tests."""

from __future__ import annotations

import random
from pathlib import Path

from chaos.runtime.context import HarnessLog, RunContext
from chaos.runtime.ledger import Ledger
from chaos.runtime.shell import Shell
from chaos.spec.load import load_experiment


def run_with(tmp_path: Path, fault: str) -> RunContext:
    """A run context (not launched) of a 2-rank experiment whose one fault is ``fault`` (YAML flow mapping)."""
    exp_file = tmp_path / "x.yaml"
    exp_file.write_text(f"name: x\nworkload: {{command: [python, train.py], nproc_per_node: 2}}\nfaults: [{fault}]\n")
    (tmp_path / "run").mkdir()
    log = HarnessLog(tmp_path / "harness.jsonl")
    return RunContext(experiment=load_experiment(exp_file), run_dir=tmp_path / "run", ckpt_dir=tmp_path / "ckpt",
                      ledger=Ledger(tmp_path / "run"), shell=Shell(log), log=log, rng=random.Random(0))
