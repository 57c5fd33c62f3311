"""The check contract: a typed config, and a verdict computed from what really happened in the run."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Literal

from pydantic import BaseModel, ConfigDict

from chaos.events import History
from chaos.registry import CHECKS

if TYPE_CHECKING:
    from chaos.experiment import Experiment

Verdict = Literal["pass", "fail", "error", "skip"]


@dataclass
class FaultRecord:
    """One injection as it happened: when, on what, and when it was reverted."""

    index: int
    kind: str
    label: str
    t_inject: float
    details: dict[str, Any] = field(default_factory=dict)
    t_revert: float | None = None
    error: str | None = None
    revert_errors: list[str] = field(default_factory=list)
    recovery: dict[str, Any] = field(default_factory=dict)


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
    """Returns the fault-free reference run's summary (final digests per rank); runs it on first use."""
    output_tail: str = ""


@dataclass
class CheckResult:
    kind: str
    verdict: Verdict
    reason: str
    figures: dict[str, Any] = field(default_factory=dict)


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

    def skipped(self, reason: str, **figures: Any) -> CheckResult:
        return CheckResult(self.kind, "skip", reason, figures)
