"""``goodput``: the share of wall time spent training new steps, with the badput split by cause."""

from __future__ import annotations

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome
from chaos.goodput import CAUSES


class GoodputConfig(CheckConfig):
    min: float = Field(default=0.0, ge=0, le=1)
    """Lowest acceptable goodput (productive seconds over wall seconds); 0 only reports the split."""


class GoodputCheck(Check, kind="goodput"):
    """The share of wall time spent training new steps, with the badput split by cause."""

    Config = GoodputConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        split = outcome.goodput
        figures = split.as_dict()
        if split.problems:
            return self.inconclusive("; ".join(split.problems), **figures)
        share = split.goodput or 0.0
        parts = ", ".join(f"{c} {split.seconds[c]:.1f} s" for c in CAUSES if c != "productive" and split.seconds[c] >= 0.05)
        text = (f"goodput {share:.1%} of {split.wall_s:.1f} s wall ({split.seconds['productive']:.1f} s productive"
                f"{'; badput: ' + parts if parts else ''})")
        if share < self.config.min:
            return self.failed(f"{text}, below the bound {self.config.min:.0%}", **figures)
        return self.passed(text + (f" (bound {self.config.min:.0%})" if self.config.min else ""), **figures)
