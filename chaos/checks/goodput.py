"""``goodput``: the share of wall time spent training new steps, with the badput split by cause."""

from __future__ import annotations

from pydantic import Field, model_validator

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome
from chaos.evidence.goodput import CAUSES


class GoodputConfig(CheckConfig):
    min: float | None = Field(default=None, gt=0, le=1)
    """Lowest acceptable goodput (productive seconds over wall seconds), required: the split itself is in
    journal.json and the report whatever the checks, and a check with no bound would pass any goodput."""

    @model_validator(mode="after")
    def _bounded(self) -> "GoodputConfig":
        if self.min is None:
            raise ValueError("goodput needs a bound: set min (a share of wall time, e.g. {min: 0.5}); the split "
                             "is reported in journal.json and the report without the check")
        return self


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
        bound = self.config.min or 0.0
        if share < bound:
            return self.failed(f"{text}, below the bound {bound:.0%}", **figures)
        return self.passed(f"{text} (bound {bound:.0%})", **figures)
