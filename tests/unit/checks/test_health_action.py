"""health_action: a degrading GPU's alert must be answered by a checkpoint taken for it, not the periodic one."""

from __future__ import annotations

from chaos.checks.health_action import HealthAction, HealthActionConfig
from chaos.outcome import FaultRecord


def ecc_creep(sim, save_step: int, reason: str | None):
    """Three XID 92 reports on device 1 (rank 1); the monitor asks for a checkpoint; one save follows."""
    from histsim import Cursor

    sim.start("0.0")
    cursor = sim.train("0.0", 1, 39, Cursor(16))
    t0 = sim.t + 0.5
    for _ in range(3):
        sim.t += 0.2
        sim.records.append({"ev": "xid_write", "t": sim.t, "index": 0, "source": "harness"})
    sim.emit("health", "0.0", 1, source="file", code=92, device=1, action="checkpoint")
    sim.train("0.0", 40, save_step, cursor)
    path = f"/ckpt/step_{save_step:06d}"
    extra = {"reason": reason} if reason else {}
    sim.emit("ckpt_begin", "0.0", 0, step=save_step, path=path, **extra)
    sim.emit("ckpt_commit", "0.0", 0, step=save_step, path=path, bytes=10, seconds=0.1)
    return FaultRecord(index=0, kind="xid", label="xid#0", t_inject=t0,
                       details={"code": 92, "device": 1, "rank": 1, "action": "alert"})


def judge(sim, outcome_of, fault):
    outcome = outcome_of(sim.history(), args={"steps": 90, "ckpt_every": 40}, faults=[fault])
    return HealthAction(HealthActionConfig(within_s=30)).evaluate(outcome)


def test_the_periodic_checkpoint_does_not_answer_the_alert(sim, outcome_of):
    result = judge(sim, outcome_of, ecc_creep(sim, save_step=40, reason=None))
    assert result.verdict == "fail", result
    assert "periodic save(s) of step [40] do not count" in result.reason


def test_a_checkpoint_taken_for_the_alert_passes(sim, outcome_of):
    result = judge(sim, outcome_of, ecc_creep(sim, save_step=40, reason="health"))
    assert result.verdict == "pass", result.reason


def test_an_off_schedule_checkpoint_passes_without_a_reason(sim, outcome_of):
    result = judge(sim, outcome_of, ecc_creep(sim, save_step=41, reason=None))
    assert result.verdict == "pass", result.reason
