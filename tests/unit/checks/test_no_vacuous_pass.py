"""Every registered check, fed an empty, missing, lying or contradictory history, refuses to PASS.

Parametrised over the check registry, so a new check joins automatically: it must come with the
minimal config it needs in REQUIRED_CONFIG below, and then hold the rule that PASS means proven.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
from histsim import Cursor, Sim, make_outcome

from chaos.evidence.events import History
from chaos.evidence.outcome import CheckResult, FaultRecord, RunOutcome, exit_code_for, judge_faults
from chaos.registry import CHECKS

REQUIRED_CONFIG: dict[str, dict[str, Any]] = {"detection": {"max_s": 30}, "recovery_time": {"max_s": 60},
                                              "goodput": {"min": 0.01}}
"""The fields a check cannot do without; every other field keeps its default."""

ARGS = {"steps": 6, "ckpt_every": 2}


def _golden() -> dict[str, Any]:
    return {"ranks": {"0": {"digest": "a" * 64, "step": 6}, "1": {"digest": "a" * 64, "step": 6}},
            "world_size": 2, "final_step": 6, "final_loss": 0.1}


def empty() -> RunOutcome:
    """Nothing at all happened, yet the workload 'exited 0'."""
    return make_outcome(History(), args=ARGS, golden=_golden)


def only_starts() -> RunOutcome:
    """Ranks started, then silence: no step, no checkpoint, no final."""
    sim = Sim()
    sim.start("0.0")
    return make_outcome(sim.history(), args=ARGS, golden=_golden)


def finals_without_evidence() -> RunOutcome:
    """Final events that claim the target step, with no digest, and no steps to back them."""
    sim = Sim()
    sim.start("0.0")
    for rank in (0, 1):
        sim.emit("final", "0.0", rank, step=6, digest=None)
    return make_outcome(sim.history(), args=ARGS, golden=_golden)


def steps_without_samples() -> RunOutcome:
    """Steps that consumed nothing anyone can trace, ending at a step the finals contradict."""
    sim = Sim()
    sim.start("0.0")
    for step in (1, 2, 3):
        for rank in (0, 1):
            sim.emit("step", "0.0", rank, step=step, epoch=0, samples=[], loss=1.0)
    sim.final("0.0", 6, digests={0: "a" * 64})
    return make_outcome(sim.history(), args=ARGS, golden=_golden)


def clean_run_whose_faults_never_fired() -> RunOutcome:
    """A clean run, but every fault the experiment asked for never fired or failed to inject."""
    sim = Sim()
    sim.start("0.0")
    sim.train("0.0", 1, 6, Cursor(16), ckpt_every=2)
    sim.final("0.0", 6)
    faults = [FaultRecord(0, kind, f"{kind}#0", None, status="never_fired")
              for kind in ("kill-rank", "hang-rank", "xid", "corrupt-checkpoint", "partition")]
    faults.append(FaultRecord(5, "kill-rank", "kill-rank#5", 1001.0, status="failed", error="no such rank"))
    return make_outcome(sim.history(), args=ARGS, golden=_golden, faults=faults)


def resume_from_nowhere() -> RunOutcome:
    """A restart that loaded a step nobody committed, and a final step beyond what was trained."""
    sim = Sim()
    sim.start("0.0")
    sim.train("0.0", 1, 3, Cursor(16))
    sim.start("0.1", load=4, path="/ckpt/step_000004")
    sim.final("0.1", 6, digests={0: "a" * 64, 1: "b" * 64})
    return make_outcome(sim.history(), args=ARGS, golden=_golden, exit_code=0)


HISTORIES: dict[str, Callable[[], RunOutcome]] = {f.__name__: f for f in (
    empty, only_starts, finals_without_evidence, steps_without_samples, resume_from_nowhere)}
"""Histories that prove nothing, or contradict themselves: no check may call any of them a PASS."""


@pytest.mark.parametrize("history", sorted(HISTORIES))
@pytest.mark.parametrize("kind", CHECKS.kinds())
def test_no_check_passes_without_proof(kind: str, history: str) -> None:
    cls = CHECKS.get(kind)
    config = cls.Config.model_validate(REQUIRED_CONFIG.get(kind, {}))
    result = cls(config).evaluate(HISTORIES[history]())
    assert result.verdict in ("fail", "inconclusive"), (
        f"{kind} said {result.verdict.upper()} over the {history!r} history: {result.reason}")
    assert result.reason, f"{kind} refused without saying why"


@pytest.mark.parametrize("kind", ["recovery_time", "detection", "health_action"])
def test_checks_of_a_fault_refuse_when_it_never_fired(kind: str) -> None:
    cls = CHECKS.get(kind)
    result = cls(cls.Config.model_validate(REQUIRED_CONFIG.get(kind, {}))).evaluate(
        clean_run_whose_faults_never_fired())
    assert result.verdict == "inconclusive", result


def test_a_clean_run_whose_faults_never_fired_exits_1() -> None:
    outcome = clean_run_whose_faults_never_fired()
    fault_results = judge_faults(outcome.faults, outcome.history.max_step())
    assert len(fault_results) == 6 and all(r.verdict == "fail" for r in fault_results)
    assert "kill-rank#5 failed to inject: no such rank" in [r.reason for r in fault_results]
    every_check_passed = [CheckResult("completes", "pass", "exit 0")]
    assert exit_code_for(fault_results + every_check_passed) == 1


def test_optional_faults_may_stay_unfired() -> None:
    optional = [FaultRecord(0, "kill-rank", "k", None, status="never_fired", optional=True)]
    assert judge_faults(optional, 10) == []


def test_the_exit_code_rule() -> None:
    def results(*verdicts: str) -> list[CheckResult]:
        return [CheckResult("c", v, "why") for v in verdicts]  # type: ignore[arg-type]

    assert exit_code_for(results("pass", "pass")) == 0
    assert exit_code_for(results()) == 0
    assert exit_code_for(results("pass", "inconclusive")) == 1
    assert exit_code_for(results("pass", "fail")) == 1
    assert exit_code_for(results("fail", "error")) == 3
    assert exit_code_for(results("pass"), harness_error=True) == 3
    assert exit_code_for(results("pass"), interrupted_by=2) == 130
