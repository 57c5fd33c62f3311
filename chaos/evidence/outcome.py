"""What a run produced and how it is judged: the outcome, check results, and the one verdict-to-exit-code rule.

It imports nothing of the harness but the event history, the fault records and (for its goodput) the
goodput split, so checks, faults, the runner, the journal and every renderer read the same types
without circles. ``FaultRecord`` lives in chaos.evidence.fault_record (goodput reads it too).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal

from chaos.evidence.events import History
from chaos.evidence.fault_record import FaultRecord, FaultStatus

__all__ = ["EXIT_FAIL", "EXIT_HARNESS", "EXIT_INVALID", "EXIT_PASS", "VERDICTS", "CheckResult", "FaultRecord",
           "FaultStatus", "RunOutcome", "RunReport", "Verdict", "VerdictLook", "exit_code_for", "judge_faults",
           "judge_protocol", "look", "run_verdict"]

if TYPE_CHECKING:
    from chaos.evidence.goodput import Goodput
    from chaos.evidence.lineage import Lineage, LineageError
    from chaos.spec.experiment import Experiment

Verdict = Literal["pass", "fail", "inconclusive", "error"]
"""pass: proven from evidence. fail: the evidence shows a problem. inconclusive: the evidence needed
to judge is missing (the reason says which, and how to provide it). error: the harness itself broke."""

EXIT_PASS, EXIT_FAIL, EXIT_INVALID, EXIT_HARNESS = 0, 1, 2, 3


@dataclass(frozen=True)
class VerdictLook:
    """How a verdict is shown everywhere (terminal, report.md, report.html, pytest) and the exit code it gives."""

    label: str
    style: str
    """rich style, for the terminal."""
    colour: str
    """Background colour in report.html."""
    exit_code: int


VERDICTS: dict[str, VerdictLook] = {
    "pass": VerdictLook("PASS", "bold green", "#1b7f3b", EXIT_PASS),
    "fail": VerdictLook("FAIL", "bold red", "#b3261e", EXIT_FAIL),
    "inconclusive": VerdictLook("INCONCLUSIVE", "bold yellow", "#b26a00", EXIT_FAIL),
    "invalid": VerdictLook("INVALID", "bold magenta", "#6a1b9a", EXIT_INVALID),
    "error": VerdictLook("ERROR", "bold magenta", "#6a1b9a", EXIT_HARNESS),
}
"""The one vocabulary of verdicts: a check's (pass, fail, inconclusive, error) and a run's (those, and invalid)."""


def look(verdict: str) -> VerdictLook:
    """A verdict's look, by its key (``pass``) or its label (``PASS``); an unknown one looks like an error."""
    return VERDICTS.get(verdict.lower(), VERDICTS["error"])


def run_verdict(exit_code: int | None, check_verdicts: list[str]) -> str:
    """A run's verdict from its exit code: exit 1 with no failed check is INCONCLUSIVE (nothing failed, but
    something could not be proven)."""
    by_code = {EXIT_PASS: "pass", EXIT_FAIL: "fail", EXIT_INVALID: "invalid"}
    verdict = by_code.get(exit_code, "error") if exit_code is not None else "error"
    if verdict == "fail" and "fail" not in check_verdicts:
        return "inconclusive"
    return verdict


@dataclass
class RunOutcome:
    """Everything the checks may judge: the merged history and what the harness itself saw."""

    experiment: "Experiment"
    run_dir: Path
    ckpt_dir: Path
    history: History
    exit_code: int | None
    timed_out: bool
    wall_s: float
    faults: list[FaultRecord] = field(default_factory=list)
    diagnostics: list[str] = field(default_factory=list)
    """Named failures the harness saw (e.g. an attempt whose ranks never joined the process group)."""
    golden: Callable[[], dict[str, Any]] | None = None
    """Returns the fault-free reference run's summary (final digests per rank). The runner obtains it before
    judging, once, when a check says it needs it (``Check.needs_golden``); judging never starts a run."""
    output_tail: str = ""

    @property
    def injected_faults(self) -> list[FaultRecord]:
        return [f for f in self.faults if f.injected]

    def lineage(self) -> "Lineage":
        """The run's lineage (chaos.evidence.lineage), rebuilt once however many checks and questions ask:
        the outcome is built after the run ended, so its history no longer changes. Raises LineageError
        (or LineageUnproven) every time it is asked when it cannot be rebuilt."""
        lineage, error = self._lineage
        if error is not None:
            raise error
        assert lineage is not None
        return lineage

    @functools.cached_property
    def _lineage(self) -> "tuple[Lineage | None, LineageError | None]":
        from chaos.evidence.lineage import LineageError, rebuild_lineage

        try:
            return rebuild_lineage(self.history), None
        except LineageError as exc:
            return None, exc

    @functools.cached_property
    def goodput(self) -> "Goodput":
        """The run's goodput split, computed once: the ``goodput`` check and the journal both read it (the
        outcome is built after the run ended, so its history no longer changes)."""
        from chaos.evidence.goodput import compute_goodput

        return compute_goodput(self.history, self.faults)


@dataclass
class CheckResult:
    kind: str
    verdict: Verdict
    reason: str
    figures: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunReport:
    """What ``chaos run`` returns: the outcome, the verdicts and where everything was written."""

    outcome: RunOutcome
    checks: list[CheckResult]
    run_dir: Path
    exit_code: int
    revert_failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.exit_code == 0


def judge_faults(faults: list[FaultRecord], final_step: int) -> list[CheckResult]:
    """A fault that was requested but did not act fails the run; ``optional`` only excuses one that never came due.

    An experiment whose fault never happened proved nothing about recovery from it.
    """
    out = []
    for f in faults:
        # optional excuses a fault whose moment never came, never one that came and failed to act.
        if f.injected or (f.optional and f.status in ("never_fired", "pending")):
            continue
        trigger = f.details.get("trigger", "its trigger")
        if f.status == "failed" or f.error:
            reason = f"{f.label} failed to inject: {f.error}"
        elif f.status == "pending":
            reason = (f"{f.label} never injected: {trigger} fired but its delay_s had not run out when the run "
                      f"ended at step {final_step}")
        else:
            reason = (f"{f.label} never injected: trigger {trigger}, run ended at step {final_step}; trigger it "
                      f"earlier, lengthen the run, or mark the fault optional: true")
        out.append(CheckResult("fault_injected", "fail", reason, {"fault": f.label, "status": f.status}))
    return out


def judge_protocol(malformed: list[str]) -> CheckResult:
    """Event lines that broke the protocol were left out: every verdict above was judged without them."""
    shown = "; ".join(malformed[:3]) + (f" (+{len(malformed) - 3} more)" if len(malformed) > 3 else "")
    return CheckResult("event_protocol", "inconclusive",
                       f"{len(malformed)} event line(s) broke the protocol and were left out of the history, so "
                       f"the verdicts were judged without them: {shown}; fix the workload's events (chaos.sdk "
                       f"writes them right)", {"malformed": malformed[:50]})


def exit_code_for(results: list[CheckResult], *, harness_error: bool = False,
                  interrupted_by: int | None = None) -> int:
    """The one rule, read from VERDICTS: 0 only when every verdict is a pass; fail or inconclusive -> 1; an
    error (or a verdict the table does not know) or a harness error -> 3."""
    if interrupted_by is not None:
        return 128 + interrupted_by  # the shell convention: 130 for Ctrl-C, 143 for SIGTERM
    if harness_error:
        return EXIT_HARNESS
    return max((look(r.verdict).exit_code for r in results), default=EXIT_PASS)
