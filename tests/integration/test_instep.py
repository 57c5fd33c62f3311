"""Faults inside the step on real DDP ranks (gloo): the honest FAILs of a stack without the guard that catches them.

The passing side (the guard restarts from a checkpoint saved before the fault, bit-identical to a
fault-free run) is experiments/nan-loss-ddp.yaml and bitflip-param-ddp.yaml, run as test items."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from chaos.run.session import run_experiment
from chaos.spec.load import load_experiment

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.integration,
              pytest.mark.skipif(sys.platform != "linux", reason="torchrun + gloo runs are exercised on Linux")]


def run(tmp_path: Path, fault: str, checks: str, args: str = "") -> dict[str, object]:
    path = tmp_path / "x.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: instep-unguarded
        workload:
          script: {REPO}/workloads/ddp.py
          nproc_per_node: 2
          max_restarts: 1
          args: {{steps: 30, ckpt_every: 10, seed: 0, step_sleep: 0.02{args}}}
        faults:
          - {fault}
        checks: {checks}
        timeout_s: 150
        """))
    report = run_experiment(load_experiment(path), tmp_path / "runs")  # with its fault-free run, as chaos run has
    assert report.exit_code == 1, [(c.kind, c.verdict, c.reason) for c in report.checks]
    return {c.kind: c for c in report.checks}


def test_without_a_guard_a_nan_trains_on_and_is_committed(tmp_path: Path) -> None:
    checks = run(tmp_path, "{kind: nan, rank: 1, where: loss, trigger: {at_step: 12}}",
                 "[completes, rolled_back, no_corrupt_commit]")
    assert checks["completes"].verdict == "pass"  # the job "finished": only the in-step checks see it
    assert checks["rolled_back"].verdict == "fail"
    assert "steps 13-30 of attempt 0.0" in checks["rolled_back"].reason
    assert checks["no_corrupt_commit"].verdict == "fail"
    assert "committed at step 20" in checks["no_corrupt_commit"].reason


def test_a_low_bit_flip_stays_finite_passes_the_guard_and_the_replicas_diverge(tmp_path: Path) -> None:
    checks = run(tmp_path, "{kind: bitflip, rank: 1, where: param, bit: 12, tensor: 0, element: 0, "
                           "trigger: {at_step: 12}}",
                 "[completes, rolled_back, replicas_agree, {no_corrupt_commit: {golden_digests: true}}]",
                 args=", nonfinite: restart")
    assert checks["completes"].verdict == "pass"
    assert checks["replicas_agree"].verdict == "fail" and "2 different digests" in checks["replicas_agree"].reason
    # Every value finite, so only the fault-free run's checkpoint at the same step shows the corruption.
    corrupt = checks["no_corrupt_commit"]
    assert corrupt.verdict == "fail", corrupt.reason
    assert "step 20" in corrupt.reason and "differs from the fault-free run's" in corrupt.reason
    assert checks["rolled_back"].verdict == "fail" and "of attempt 0.0" in checks["rolled_back"].reason


def test_a_guard_that_skips_the_step_keeps_the_weights_clean_and_loses_the_batch(tmp_path: Path) -> None:
    """``--nonfinite skip`` (a loss scaler's answer to an overflow): the update of the bad step is dropped on every
    rank, nothing poisoned is committed and the job never restarts, but the step's samples were consumed and
    never trained on, and exactly_once names them (the rollback that trains them again is
    experiments/nan-loss-rollback-ddp.yaml)."""
    checks = run(tmp_path, "{kind: nan, rank: 1, where: loss, trigger: {at_step: 12}}",
                 "[{completes: {max_restarts: 0}}, {detection: {max_s: 10, max_steps: 0}}, no_corrupt_commit, "
                 "exactly_once]", args=", nonfinite: skip")
    assert checks["completes"].verdict == "pass", checks["completes"].reason
    assert checks["detection"].verdict == "pass", checks["detection"].reason
    assert checks["no_corrupt_commit"].verdict == "pass", checks["no_corrupt_commit"].reason
    once = checks["exactly_once"]
    assert once.verdict == "fail", once.reason
    assert "8 consumed by step(s) whose update the workload dropped (skipped: 0.0:13)" in once.reason, once.reason
    assert once.figures["missing"]["count"] == 0 and once.figures["duplicated"]["count"] == 0
