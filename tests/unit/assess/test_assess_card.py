"""The card says only what each run proved: generated journals with known truth, and the lies a row must not pass."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from chaos.assess.card import REMEDY, project, row_of
from chaos.assess.plan import Options, plan
from chaos.evidence.outcome import CheckResult, FaultRecord
from chaos.report.journal import Journal

from test_assess_plan import seen


def probe(name: str, observation=None):
    return next(p for p in plan(observation or seen(), Options(root=True)) if p.name == name)


def journal(checks: dict[str, str], *, recovery: dict[str, Any] | None = None, injected: bool = True,
            attempts: int = 2, exit_code: int | None = None, by_fault: dict | None = None) -> Journal:
    fault = FaultRecord(index=0, kind="kill-rank", label="kill-rank#0", t_inject=1.0 if injected else None,
                        recovery=recovery if recovery is not None else {"landed_step": 25, "resumed_from_step": 20,
                                                                          "durable_step": 20, "resume_s": 9.5},
                        status="injected" if injected else "never_fired")
    results = [CheckResult(kind, verdict, f"{kind} said {verdict}") for kind, verdict in checks.items()]
    failed = any(v != "pass" for v in checks.values())
    code = exit_code if exit_code is not None else (1 if failed or not injected else 0)
    return Journal(experiment="x", run_dir="/r/y", exit_code=code,
                   verdict={0: "PASS", 1: "FAIL", 3: "ERROR"}.get(code, "INTERRUPTED"),
                   attempts=[f"0.{i}" for i in range(attempts)], faults=[fault], checks=results,
                   goodput={"by_fault": by_fault or {"kill-rank#0": {"detection": 1.0, "restart": 6.0,
                                                                      "ckpt_load": 2.0, "recompute": 0.4}}})


ALL_PASS = {"completes": "pass", "recovery_time": "pass", "exactly_once": "pass", "checkpoint_integrity": "pass",
            "matches_golden": "pass"}


def test_a_survived_kill_is_a_yes_with_its_figures() -> None:
    row = row_of(probe("rank-kill"), journal(ALL_PASS), seen())
    assert (row.survived, row.lost_steps, row.recovery_s, row.lost_s) == ("yes", 5, 9.5, 9.4)
    assert row.exactly_once == "PASS" and row.integrity == "PASS" and row.finding.startswith("recovered")


def test_a_fault_that_never_struck_is_not_a_survival() -> None:
    row = row_of(probe("rank-kill"), journal({"completes": "pass"}, injected=False), seen())
    assert row.survived == "not tested" and "never struck" in row.finding


def test_a_kill_that_missed_the_save_is_not_tested() -> None:
    j = journal({"completes": "pass", "struck_mid_save": "fail", "checkpoint_integrity": "pass"})
    row = row_of(probe("kill-during-save"), j, seen())
    assert row.survived == "not tested" and "did not land inside a save" in row.finding


def test_a_job_ended_by_the_kill_is_told_to_restart() -> None:
    row = row_of(probe("rank-kill"), journal({**ALL_PASS, "completes": "fail"}, attempts=1), seen())
    assert row.survived == "no" and row.remedy == REMEDY["no_restart"]


def test_a_restart_from_scratch_is_named_with_the_steps_redone() -> None:
    j = journal({**ALL_PASS, "recovery_time": "fail"}, recovery={"landed_step": 25, "resumed_from_step": 0,
                                                                  "durable_step": 20, "resume_s": 4.0})
    row = row_of(probe("rank-kill"), j, seen())
    assert row.survived == "yes" and "from scratch although step 20 was saved: 25 steps" in row.finding
    assert row.remedy == REMEDY["scratch"]


def test_duplicates_and_torn_saves_get_their_remedies() -> None:
    assert row_of(probe("rank-kill"), journal({**ALL_PASS, "exactly_once": "fail"}), seen()).remedy == REMEDY["samples"]
    torn = journal({"completes": "fail", "struck_mid_save": "pass", "checkpoint_integrity": "fail"})
    assert row_of(probe("kill-during-save"), torn, seen()).remedy == REMEDY["torn"]
    corrupt = journal({"completes": "fail", "checkpoint_integrity": "fail"})
    assert row_of(probe("corrupt-newest"), corrupt, seen()).remedy == REMEDY["corrupt"]


def test_a_hang_outlived_only_because_it_thawed_is_no_survival() -> None:
    row = row_of(probe("hang"), journal({"completes": "pass", "detection": "fail"}, attempts=1), seen())
    assert row.survived == "only by luck" and row.remedy == REMEDY["hang"]


def test_a_nan_trained_on_is_named() -> None:
    j = journal({"completes": "pass", "detection": "fail", "no_corrupt_commit": "fail", "matches_golden": "fail"},
                attempts=1)
    row = row_of(probe("nan"), j, seen())
    assert row.remedy == REMEDY["nan"] and "trained on" in row.finding and row.integrity == "FAIL"
    assert row.survived == "no" and row.exactly_once == "not judged here"  # ran to the end, on poisoned weights


def test_untraced_samples_say_the_lines_that_trace_them() -> None:
    plain = seen(samples_traced=False)
    row = row_of(probe("rank-kill", plain), journal({"completes": "pass"}), plain)
    assert row.exactly_once.startswith("not traced") and "sdk.step(" in row.exactly_once
    hf = seen(samples_traced=False, stack=["Hugging Face Transformers"])
    assert "ChaosCallback" in row_of(probe("rank-kill", hf), journal({"completes": "pass"}), hf).exactly_once


def test_an_interrupted_run_is_not_tested_whatever_its_checks_said() -> None:
    j = journal(ALL_PASS, exit_code=130).model_copy(update={"verdict": "INTERRUPTED"})
    row = row_of(probe("rank-kill"), j, seen())
    assert row.survived == "not tested" and "interrupted" in row.finding


def test_a_run_the_harness_could_not_carry_out_is_an_error() -> None:
    j = journal({"completes": "error"}, exit_code=3)
    assert row_of(probe("rank-kill"), j, seen()).survived == "error"


def test_inconclusive_checks_are_named_in_a_recovered_row() -> None:
    row = row_of(probe("rank-kill"), journal({**ALL_PASS, "exactly_once": "inconclusive"}), seen())
    assert "not proven: exactly_once" in row.finding


@pytest.mark.parametrize("survived", ["yes", "no"])
def test_the_projection_needs_a_survived_kill(survived: str) -> None:
    j = journal(ALL_PASS if survived == "yes" else {"completes": "fail"})
    row = replace(row_of(probe("rank-kill"), j, seen()), survived=survived)
    scale, note = project([row], {"rank-kill": j}, seen(), 16384)
    if survived == "no":
        assert scale is None and "no rank death was survived" in note
    else:
        assert scale.restart_s == 9.0 and scale.interval_s == 0.7 and 0.0 < scale.goodput < 1.0
        assert "Llama 3" in scale.source
