"""One vocabulary of verdicts: each has one label, one terminal style, one report colour and one exit code."""

from __future__ import annotations

from chaos.evidence.outcome import EXIT_FAIL, EXIT_HARNESS, EXIT_INVALID, EXIT_PASS, VERDICTS, look, run_verdict


def test_each_verdict_has_one_look_and_exit_code() -> None:
    assert {k: v.exit_code for k, v in VERDICTS.items()} == {
        "pass": EXIT_PASS, "fail": EXIT_FAIL, "inconclusive": EXIT_FAIL, "invalid": EXIT_INVALID, "error": EXIT_HARNESS}
    assert look("PASS") is look("pass") and look("something new").label == "ERROR"
    assert len({v.label for v in VERDICTS.values()}) == len(VERDICTS)


def test_a_run_that_exits_1_without_a_failed_check_is_inconclusive() -> None:
    assert run_verdict(1, ["pass", "inconclusive"]) == "inconclusive"
    assert run_verdict(1, ["fail", "inconclusive"]) == "fail"
    assert run_verdict(0, ["pass"]) == "pass"
    assert run_verdict(2, []) == "invalid"
    assert run_verdict(3, ["error"]) == run_verdict(130, []) == run_verdict(None, []) == "error"
