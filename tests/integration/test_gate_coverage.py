"""``chaos coverage`` end to end: the reference pre-flight gate on 2 real torch ranks, calibrated, run healthy and
under faults before the launch (an XID in the kernel log) and during it (a rank killed), judged from the runs."""

from __future__ import annotations

import json
from pathlib import Path

from chaos.cli import main

ROOT = Path(__file__).resolve().parents[2]

PLAN = f"""
name: gate-it
workload:
  script: {ROOT}/workloads/preflight.py
  nproc_per_node: 2
  max_restarts: 0
  args: {{baseline: "{{gate_dir}}/baseline.json", timeout_s: 10, ckpt_mb: 1}}
target: local
gate:
  calibrate: [--record-baseline]
  deadline_s: 60
  require_caught: [xid-79, killed-rank]
faults:
  - {{kind: xid, name: xid-79, code: 79}}
  - {{kind: xid, name: xid-13-application, code: 13}}
  - {{kind: kill-rank, name: killed-rank, rank: 1, trigger: {{on_event: start}}}}
timeout_s: 90
"""


def test_the_reference_gate_catches_what_it_should_and_says_what_it_misses(tmp_path: Path, capsys):
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN)
    prom = tmp_path / "gate.prom"
    code = main(["coverage", str(plan), "--runs-dir", str(tmp_path / "runs"), "--metrics-textfile", str(prom)])
    out = capsys.readouterr().out
    assert code == 0, out
    [folder] = (tmp_path / "runs").iterdir()
    cov = json.loads((folder / "coverage.json").read_text())
    assert json.loads((folder / "baseline.json").read_text())["world_size"] == 2  # the calibration recorded it
    assert cov["calibration"]["verdict"] == "ok"
    assert [c["verdict"] for c in cov["healthy"]] == ["ok"]
    verdicts = {c["fault"]: c for c in cov["faults"]}
    # An XID 79 already in the kernel log when the gate starts: every rank fails at once, saying why.
    assert verdicts["xid-79"]["verdict"] == "caught"
    assert "FAIL kernel_log" in verdicts["xid-79"]["said"] and "XID 79" in verdicts["xid-79"]["said"]
    # An application XID was the last job's, not the node's: the gate passes, and the matrix says it missed.
    assert verdicts["xid-13-application"]["verdict"] == "missed"
    assert verdicts["killed-rank"]["verdict"] == "caught" and verdicts["killed-rank"]["seconds"] < 30
    assert cov["coverage"] == 2 / 3 and cov["exit_code"] == 0
    # before_launch: the XID was in the kernel log before any rank of its run existed.
    log = [json.loads(line) for line in (Path(verdicts["xid-79"]["run_dir"]) / "harness.jsonl").read_text().splitlines()]
    order = [r["ev"] for r in log if r["ev"] in ("fault_inject", "worker_spawn")]
    assert order[0] == "fault_inject" and "worker_spawn" in order
    assert "chaos_gate_coverage_ratio" in prom.read_text()
    assert "2 of 3 faults caught" in out
