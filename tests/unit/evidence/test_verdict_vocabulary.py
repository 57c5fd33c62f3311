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


def test_the_exit_code_rule_reads_the_table() -> None:
    from chaos.evidence.outcome import CheckResult, exit_code_for

    def run(*verdicts: str) -> int:
        return exit_code_for([CheckResult("c", v, "r") for v in verdicts])  # type: ignore[arg-type]

    assert run() == run("pass", "pass") == EXIT_PASS
    assert run("pass", "inconclusive") == run("fail", "pass") == EXIT_FAIL
    assert run("fail", "error") == EXIT_HARNESS
    assert run("pass", "passed") == EXIT_HARNESS  # a verdict the table does not know is never a pass
    assert exit_code_for([CheckResult("c", "pass", "r")], harness_error=True) == EXIT_HARNESS
    assert exit_code_for([], interrupted_by=2) == 130
