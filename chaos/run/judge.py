"""Judging a finished run: the golden reference obtained once, before judging, when a check needs it; then
every check's verdict (a check that raises is an error verdict, never a crash of the run)."""

from __future__ import annotations

from typing import Any, Callable

from chaos.errors import ChaosError, HarnessError
from chaos.evidence.outcome import CheckResult, RunOutcome
from chaos.run.plugins import build_check
from chaos.spec.experiment import CheckSpec


def judge_checks(specs: list[CheckSpec], outcome: RunOutcome) -> list[CheckResult]:
    """Every check's verdict. The golden summary is obtained first, once, if any check needs it: judging
    reads it and never starts a run."""
    checks: list[tuple[CheckSpec, Any]] = []
    for spec in specs:
        try:
            checks.append((spec, build_check(spec)))
        except ChaosError as exc:
            checks.append((spec, CheckResult(spec.kind, "error", str(exc))))
        except Exception as exc:  # a bug in one check must not hide the other verdicts, nor the journal
            checks.append((spec, CheckResult(spec.kind, "error", f"the check crashed: {type(exc).__name__}: {exc}")))
    if outcome.golden is not None:
        outcome.golden = _obtained(outcome.golden, any(_asks_golden(c, outcome) for _, c in checks))
    return [c if isinstance(c, CheckResult) else _evaluate(spec.kind, c, outcome) for spec, c in checks]


def _asks_golden(check: Any, outcome: RunOutcome) -> bool:
    if isinstance(check, CheckResult):
        return False
    try:
        return bool(check.needs_golden(outcome))
    except Exception:  # the check's evaluate meets the same problem and reports it
        return False


def _evaluate(kind: str, check: Any, outcome: RunOutcome) -> CheckResult:
    try:
        return check.evaluate(outcome)
    except ChaosError as exc:
        return CheckResult(kind, "error", str(exc))
    except Exception as exc:  # a bug in one check must not hide the other verdicts
        return CheckResult(kind, "error", f"the check crashed: {type(exc).__name__}: {exc}")


def _obtained(golden: Callable[[], dict[str, Any]], needed: bool) -> Callable[[], dict[str, Any]]:
    """The golden summary, obtained now when a check needs it (or its error, raised again to each asker); a
    callable that refuses to start a run when no check said it needed one."""
    if not needed:
        def unasked() -> dict[str, Any]:
            raise HarnessError("a check read the golden run without saying it needs it (Check.needs_golden)")
        return unasked
    try:
        summary = golden()
    except Exception as exc:  # each check that reads it meets the same error, as it did when it ran the golden
        error = exc

        def failed() -> dict[str, Any]:
            raise error
        return failed
    return lambda: summary
