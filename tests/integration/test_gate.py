"""The CI gate on figures: a deliberately slowed checkpoint save fails against a baseline of the normal one,
and a rerun of the unchanged workload does not regress that figure.

The workload is the torch-free agent (tests/fixtures/fake_torchrun.py) with a checkpoint write delay:
this tests the gate, not torch. The same proof on the real DDP workload, with ten reruns of the
unchanged code, is ci/bench/gate_noise.py (figures in the issue notes)."""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from chaos.cli import main

FAKE_TORCHRUN = Path(__file__).resolve().parents[1] / "fixtures" / "fake_torchrun.py"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(sys.platform != "linux", reason="torchrun + gloo runs are exercised on Linux"),
]


def experiment(path: Path, write_delay_s: float) -> Path:
    # The same experiment name on both sides: the gate compares an experiment with its own baseline.
    path.write_text(f"""name: gate-ddp
workload:
  command: [{sys.executable}, {FAKE_TORCHRUN}, --nproc, "2", --steps, "20", --ckpt-every, "5",
            --step-sleep, "0.02", --ckpt-write-s, "{write_delay_s}"]
checks:
  - completes: {{max_restarts: 0, min_step: 20}}
timeout_s: 120
""")
    return path


def save_row(markdown: str) -> str:
    return next(line for line in markdown.splitlines() if line.startswith("| gate-ddp | ckpt.save_s |"))


def test_a_slowed_checkpoint_save_fails_the_gate(tmp_path: Path) -> None:
    normal = experiment(tmp_path / "normal.yaml", 0.0)
    slowed = experiment(tmp_path / "slowed.yaml", 1.0)
    base_runs, baseline = tmp_path / "base-runs", tmp_path / "baseline.json"
    assert main(["run", str(normal), "--runs-dir", str(base_runs)]) == 0
    assert main(["baseline", "save", str(base_runs), "-o", str(baseline)]) == 0

    md, junit = tmp_path / "slowed.md", tmp_path / "slowed.xml"
    code = main(["run", str(slowed), "--runs-dir", str(tmp_path / "slowed-runs"), "--baseline", str(baseline),
                 "--summary-md", str(md), "--junit", str(junit)])
    assert code == 1, md.read_text()
    assert "**REGRESSED**" in save_row(md.read_text())
    cases = {c.get("name"): c for c in ET.parse(junit).getroot().iter("testcase")}
    gate = cases["gate-ddp"]
    assert "ckpt.save_s" in gate.find("failure").get("message")
    props = {p.get("name"): float(p.get("value")) for p in gate.iter("property")}
    # As measured (the save slept 1 s); what the gate compared is the figure at the baseline's host speed.
    assert props["ckpt.save_s"] >= 1.0 > props["ckpt.save_s.baseline"]
    assert props["ckpt.save_s.at_baseline_speed"] > props["ckpt.save_s.baseline"]

    md = tmp_path / "unchanged.md"
    main(["run", str(normal), "--runs-dir", str(tmp_path / "again-runs"), "--baseline", str(baseline),
          "--summary-md", str(md)])
    assert save_row(md.read_text()).endswith("| ok |"), md.read_text()
