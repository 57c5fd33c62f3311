"""One fault as it happened (or did not): when it acted, on what, when it was reverted, and its recovery figures."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

FaultStatus = Literal["injected", "failed", "never_fired", "pending"]
"""injected: the fault acted. failed: inject raised. never_fired: its trigger never fired.
pending: it fired but its delay_s had not run out when the run ended."""


@dataclass
class FaultRecord:
    """One injection as it happened (or did not): when, on what, and when it was reverted."""

    index: int
    kind: str
    label: str
    t_inject: float | None
    details: dict[str, Any] = field(default_factory=dict)
    t_revert: float | None = None
    """When the fault was undone; a revert at the end of the run counts too."""
    t_release: float | None = None
    """When a timed fault (duration_s) was released while the workload still ran: reactions after
    this are the fault going away, not the job detecting it."""
    error: str | None = None
    revert_errors: list[str] = field(default_factory=list)
    recovery: dict[str, Any] = field(default_factory=dict)
    status: FaultStatus = "injected"
    optional: bool = False
    """The experiment allows this fault not to fire (``optional: true``)."""

    @property
    def injected(self) -> bool:
        return self.status == "injected" and self.error is None
