"""The check contract: a typed config, and a verdict computed from what really happened in the run."""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from chaos.outcome import CheckResult, FaultRecord, RunOutcome, Verdict
from chaos.registry import CHECKS

__all__ = ["Check", "CheckConfig", "CheckResult", "FaultRecord", "RunOutcome", "Verdict"]


class CheckConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class Check:
    """Base class. Subclass with ``kind="..."`` to register; ``evaluate`` returns a verdict with a one-line reason."""

    kind: ClassVar[str] = ""
    Config: ClassVar[type[CheckConfig]] = CheckConfig

    def __init_subclass__(cls, kind: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if kind:
            cls.kind = kind
            CHECKS.register(kind, cls)

    def __init__(self, config: CheckConfig) -> None:
        self.config = config

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        raise NotImplementedError

    def passed(self, reason: str, **figures: Any) -> CheckResult:
        return CheckResult(self.kind, "pass", reason, figures)

    def failed(self, reason: str, **figures: Any) -> CheckResult:
        return CheckResult(self.kind, "fail", reason, figures)

    def inconclusive(self, reason: str, **figures: Any) -> CheckResult:
        """The evidence this check needs is missing: say which, and how to provide it. Exits 1, never a pass."""
        return CheckResult(self.kind, "inconclusive", reason, figures)
