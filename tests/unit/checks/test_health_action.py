"""health_action: a degrading GPU's alert must be answered by a checkpoint taken for it, not the periodic one."""

from __future__ import annotations

from chaos.checks.health_action import HealthAction, HealthActionConfig
from chaos.evidence.outcome import FaultRecord


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


def xid79_drained(sim, tmp_path, *, rerun_on_drained: bool):
    """XID 79 on node n1's device 0 (rank 1); n1 is drained and the job requeued; 1.0 runs on n0 + n2 (or n1 again)."""
    from histsim import Cursor

    from chaos.health.exclusions import add_exclusion, exclusions_path

    sim.start("0.0")
    cursor = sim.train("0.0", 1, 10, Cursor(16), ckpt_every=10)
    t0 = sim.t + 0.5
    sim.records.append({"ev": "xid_write", "t": t0 + 0.1, "index": 0, "source": "harness"})
    ev = sim.emit("health", "0.0", 1, source="file", code=79, device=0, action="exclude")
    ev["host"] = "n1"
    add_exclusion(exclusions_path(tmp_path), {"device": 0, "host": "n1", "code": 79, "rank": 1, "attempt": "0.0"})
    sim.t += 1.0
    sim.records.append({"ev": "slurm_drain", "t": sim.t, "source": "harness", "node": "n1", "reason": "XID 79"})
    sim.start("1.0", load=10)
    for r in sim.records:
        if r.get("attempt") == "1.0" and r.get("ev") == "start":
            r["host"] = "n1" if rerun_on_drained and r["rank"] == 1 else f"n{2 * r['rank']}"
    sim.train("1.0", 11, 16, sim.resume(10))
    sim.final("1.0", 16)
    del cursor
    return FaultRecord(index=0, kind="xid", label="xid#0", t_inject=t0,
                       details={"code": 79, "device": 0, "rank": 1, "node": "n1", "action": "exclude"})


def judge_in(sim, outcome_of, fault, run_dir):
    import dataclasses

    outcome = dataclasses.replace(outcome_of(sim.history(), faults=[fault]), run_dir=run_dir)
    return HealthAction(HealthActionConfig(within_s=30)).evaluate(outcome)


def test_an_xid_79_on_slurm_drains_the_node_and_the_job_runs_without_it(sim, outcome_of, tmp_path):
    result = judge_in(sim, outcome_of, xid79_drained(sim, tmp_path, rerun_on_drained=False), tmp_path)
    assert result.verdict == "pass", result.reason
    assert result.figures["xid#0"]["drained"] == "n1" and "n1" not in result.figures["xid#0"]["hosts_after"]


def test_a_job_that_runs_on_the_drained_node_again_fails(sim, outcome_of, tmp_path):
    result = judge_in(sim, outcome_of, xid79_drained(sim, tmp_path, rerun_on_drained=True), tmp_path)
    assert result.verdict == "fail" and "ran on n1 after it was drained" in result.reason


def test_the_file_source_names_this_nodes_own_log(tmp_path, monkeypatch):
    from chaos.health.sources import open_source

    monkeypatch.setenv("CHAOS_HOST", "node1")
    source = open_source(f"file:{tmp_path}/kernel-{{host}}.log")
    assert str(source.path).endswith("kernel-node1.log")


def test_each_host_has_its_own_device_0(tmp_path):
    from chaos.health.exclusions import add_exclusion, read_exclusions

    path = tmp_path / "excluded_devices.json"
    for host in ("node0", "node1", "node1"):
        add_exclusion(path, {"device": 0, "host": host, "code": 79})
    assert [(e["host"], e["device"]) for e in read_exclusions(path)] == [("node0", 0), ("node1", 0)]


def test_one_degrading_fault_fired_three_times_is_judged_with_the_policy_that_counted_all_three(sim, outcome_of):
    """Issue 32 (false FAIL): the third report was judged with a fresh policy ('alert'), failing a monitor
    that escalated to a checkpoint exactly as its policy says."""
    from histsim import Cursor

    sim.start("0.0")
    cursor = sim.train("0.0", 1, 10, Cursor(16))
    faults = []
    for n, action in enumerate(["alert", "alert", "checkpoint"]):
        t0 = sim.t + 0.5
        sim.t += 1.0
        sim.records.append({"ev": "xid_write", "t": sim.t, "index": 0, "source": "harness"})
        sim.emit("health", "0.0", 1, source="file", code=92, device=1, action=action)
        faults.append(FaultRecord(index=0, kind="xid", label="xid#0", t_inject=t0,
                                  details={"code": 92, "device": 1, "rank": 1, "action": "alert"}))
        cursor = sim.train("0.0", 11 + n, 11 + n, cursor)
    sim.emit("ckpt_begin", "0.0", 0, step=13, path="/ckpt/step_000013", reason="health")
    sim.emit("ckpt_commit", "0.0", 0, step=13, path="/ckpt/step_000013", bytes=10, seconds=0.1)
    outcome = outcome_of(sim.history(), args={"steps": 90, "ckpt_every": 40}, faults=faults)
    result = HealthAction(HealthActionConfig(within_s=30)).evaluate(outcome)
    assert result.verdict == "pass", result.reason
    # A monitor that never escalated still fails: the third report required a checkpoint.
    for r in sim.records:
        if r.get("action") == "checkpoint":
            r["action"] = "alert"
    outcome = outcome_of(sim.history(), args={"steps": 90, "ckpt_every": 40}, faults=faults)
    result = HealthAction(HealthActionConfig(within_s=30)).evaluate(outcome)
    assert result.verdict == "fail" and "requires 'checkpoint'" in result.reason, result.reason
