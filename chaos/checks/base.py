"""The check contract: a typed config, and a verdict computed from what really happened in the run."""

from __future__ import annotations

import os
from typing import Any, Callable, ClassVar

from chaos.evidence.lineage import Lineage, LineageError, LineageUnproven
from chaos.evidence.replica_groups import Groups, replica_groups
from chaos.evidence.outcome import CheckResult, FaultRecord, RunOutcome, Verdict
from chaos.registry import CHECKS, Plugin
from chaos.spec.configs import CheckConfig

__all__ = ["Check", "CheckConfig", "CheckResult", "FaultRecord", "RunOutcome", "Verdict"]


class Check(Plugin):
    """Base class. Subclass with ``kind="..."`` to register; ``evaluate`` returns a verdict with a one-line reason."""

    registry = CHECKS
    Config: ClassVar[type[CheckConfig]] = CheckConfig
    scans_values: ClassVar[bool] = False
    """Judging needs the witness to scan every committed checkpoint's tensors (chaos.checkpoint.values)."""

    def __init__(self, config: CheckConfig) -> None:
        self.config = config

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        raise NotImplementedError

    def needs_golden(self, outcome: RunOutcome) -> bool:
        """Whether judging this run needs the fault-free (golden) run's summary. Asked before any check is
        judged: the run obtains the golden once, before judging, and ``outcome.golden()`` then only returns
        it (no check starts a nested run)."""
        return False

    def passed(self, reason: str, **figures: Any) -> CheckResult:
        return CheckResult(self.kind, "pass", reason, figures)

    def failed(self, reason: str, **figures: Any) -> CheckResult:
        return CheckResult(self.kind, "fail", reason, figures)

    def inconclusive(self, reason: str, **figures: Any) -> CheckResult:
        """The evidence this check needs is missing: say which, and how to provide it. Exits 1, never a pass."""
        return CheckResult(self.kind, "inconclusive", reason, figures)

    def lineage_or_verdict(self, outcome: RunOutcome) -> "Lineage | CheckResult":
        """The run's lineage, or the verdict when it cannot be had: one resting on a link nothing proves is
        INCONCLUSIVE, one that cannot be rebuilt (a resume from an uncommitted step) is a FAIL."""
        try:
            return outcome.lineage()
        except LineageUnproven as exc:
            return self.inconclusive(f"lineage cannot be proven: {exc}")
        except LineageError as exc:
            return self.failed(f"lineage cannot be rebuilt: {exc}")

    def replica_groups_or_verdict(self, outcome: RunOutcome) -> "Groups | CheckResult":
        """A drop-replica job's replica groups (chaos.evidence.replica_groups), or the verdict when there are none
        (INCONCLUSIVE: not a drop-replica job) or a process claims another group than the harness saw (FAIL)."""
        groups = replica_groups(outcome.history)
        if not groups.processes:
            return self.inconclusive("no process spoke for a replica group (a worker the harness saw on node rg<k>, "
                                     "or start/step records with replica_group): run a drop-replica job on target "
                                     "torchft, reporting through chaos.integrations.torchft")
        if groups.contradictions:
            return self.failed("; ".join(groups.contradictions[:3]))
        return groups

    def judge_each(self, faults: list[FaultRecord],
                   judge: Callable[[FaultRecord], tuple[str | None, dict[str, Any]]]) -> tuple[CheckResult | None, dict[str, Any]]:
        """Judge ``faults`` in order with ``judge(fault) -> (problem or None, figures)``. The first problem
        fails the check, naming its fault, with the figures of every fault judged so far; without one,
        (None, figures by fault label) for the caller's pass."""
        figures: dict[str, Any] = {}
        for fault in faults:
            problem, figs = judge(fault)
            figures[fault.label] = figs
            if problem:
                return self.failed(f"{fault.label}: {problem}", **figures), figures
        return None, figures


def norm_path(path: Any) -> str:
    """A checkpoint path as one key, however an event spelled it (relative, ``..``, a link); "" for none."""
    return os.path.realpath(str(path)) if path else ""


def rank_order(rank: str) -> tuple[int, str]:
    """Sort key for ranks kept as strings (JSON keys): numerically, anything else after them."""
    return (int(rank), "") if rank.lstrip("-").isdigit() else (1 << 30, rank)
