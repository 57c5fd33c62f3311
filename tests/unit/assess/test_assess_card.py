"""The card says only what each run proved: generated journals with known truth, and the lies a row must not pass."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import json

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


def test_a_corruption_whose_kill_never_came_tested_no_restart() -> None:
    j = journal({"completes": "fail", "checkpoint_integrity": "pass"}, attempts=1)
    corrupt = FaultRecord(index=0, kind="corrupt-checkpoint", label="corrupt-checkpoint#0", t_inject=1.0)
    kill = replace(j.faults[0], index=1, label="kill-rank#1", t_inject=None, status="never_fired")
    row = row_of(probe("corrupt-newest"), j.model_copy(update={"faults": [corrupt, kill]}), seen())
    assert row.survived == "not tested" and "kill-rank#1: never_fired" in row.finding, row


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
    assert row_of(probe("corrupt-newest"), corrupted({"completes": "fail", "checkpoint_integrity": "fail"}, 20),
                  seen()).remedy == REMEDY["corrupt"]


def corrupted(checks: dict[str, str], newest: int) -> Journal:
    """A corrupt-newest run: step 20's save truncated, the kill when the newest durable save was ``newest``."""
    j = journal(checks, recovery={"landed_step": 25, "resumed_from_step": 10, "durable_step": newest, "resume_s": 5.0})
    cut = FaultRecord(index=0, kind="corrupt-checkpoint", label="corrupt-checkpoint#0", t_inject=1.0,
                      details={"step": 20, "mode": "truncate"})
    return j.model_copy(update={"faults": [cut, replace(j.faults[0], index=1, label="kill-rank#1")]})


def test_a_corruption_the_restart_never_needed_tested_nothing() -> None:
    assert row_of(probe("corrupt-newest"), corrupted(ALL_PASS, 20), seen()).survived == "yes"
    row = row_of(probe("corrupt-newest"), corrupted(ALL_PASS, 30), seen())
    assert row.survived == "not tested" and "newer save (step 30)" in row.finding, row


def test_a_full_disk_no_save_met_tested_nothing(tmp_path) -> None:
    (tmp_path / "events").mkdir()
    base = {"mono": 1.0, "pid": 7, "host": "local", "rank": 0, "world_size": 2, "attempt": "0.0", "path": "/c/s"}
    j = journal({"completes": "pass", "checkpoint_integrity": "pass"}).model_copy(update={"run_dir": str(tmp_path)})
    full = FaultRecord(index=0, kind="storage-full", label="storage-full#0", t_inject=100.0, t_release=103.0,
                       t_revert=103.0)
    j = j.model_copy(update={"faults": [full]})
    for t, verdict in ((90.0, "not tested"), (101.0, "yes")):
        (tmp_path / "events" / "local-7.jsonl").write_text(json.dumps({"ev": "ckpt_begin", "t": t, "step": 20, **base}) + "\n")
        row = row_of(probe("storage-full"), j, seen())
        assert row.survived == verdict, (t, row)
    gone = row_of(probe("storage-full"), j.model_copy(update={"run_dir": str(tmp_path / "gone")}), seen())
    assert gone.survived == "not tested", gone  # no records to read: nothing shows a save met the full disk


@pytest.mark.parametrize("name,checks", [
    ("hang", {"completes": "pass", "detection": "inconclusive"}),
    ("nan", {"completes": "pass", "detection": "inconclusive", "no_corrupt_commit": "pass"}),
    ("nan", {"completes": "pass", "detection": "pass", "no_corrupt_commit": "inconclusive"}),
])
def test_finishing_is_no_survival_of_a_hang_or_a_nan_unless_the_job_acted(name: str, checks: dict) -> None:
    row = row_of(probe(name), journal(checks, attempts=1), seen())
    assert row.survived == "not proven" and "INCONCLUSIVE" in row.finding, row


def test_a_hang_outlived_only_because_it_thawed_is_no_survival() -> None:
    row = row_of(probe("hang"), journal({"completes": "pass", "detection": "fail"}, attempts=1), seen())
    assert row.survived == "only by luck" and row.remedy == REMEDY["hang"]


def test_a_nan_trained_on_is_named() -> None:
    j = journal({"completes": "pass", "detection": "fail", "no_corrupt_commit": "fail", "matches_golden": "fail"},
                attempts=1)
    row = row_of(probe("nan"), j, seen())
    assert row.remedy == REMEDY["nan"] and "trained on" in row.finding and row.integrity == "FAIL"
    assert row.survived == "no" and row.exactly_once == "not judged here"  # ran to the end, on poisoned weights


def test_a_nan_caught_in_time_is_not_called_trained_on() -> None:
    j = journal({"completes": "pass", "detection": "pass", "no_corrupt_commit": "pass", "matches_golden": "fail"})
    row = row_of(probe("nan"), j, seen())
    assert row.survived == "yes" and "was caught" in row.finding and row.remedy == "", row


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


def test_no_projection_from_a_restart_the_model_does_not_describe() -> None:
    scratch = journal({**ALL_PASS, "recovery_time": "fail"})  # resumed from scratch: no resume from the newest save
    partial = journal(ALL_PASS, by_fault={"kill-rank#0": {"recompute": 0.4}})  # no detection, restart or load billed
    for j in (scratch, partial):
        row = replace(row_of(probe("rank-kill"), j, seen()), survived="yes")
        scale, note = project([row], {"rank-kill": j}, seen(), 16384)
        assert scale is None and "no projection" in note
    single = seen(saves=[60])  # one save, at the end: no periodic interval
    j = journal(ALL_PASS)
    assert project([row_of(probe("rank-kill"), j, seen())], {"rank-kill": j}, single, 16384)[0] is None


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
