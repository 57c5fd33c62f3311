"""The XID policy (from the field table in the seeds): what each code means and what the job must do about it."""

from __future__ import annotations

import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from enum import Enum
from typing import Callable


class Action(str, Enum):
    """What the monitor does about an XID."""

    RESTART = "restart"
    """Application error: this rank exits non-zero so torchrun restarts the job from its checkpoint."""
    EXCLUDE = "exclude"
    """Hardware or firmware fault: record the device as bad and stop; the job is relaunched without it."""
    CHECKPOINT = "checkpoint"
    """A degrading card: alert and checkpoint now, while the card still works."""
    ALERT = "alert"
    """Worth a ticket, not an action (one isolated ECC event)."""
    IGNORE = "ignore"
    """An XID this table does not know: reported, nothing done."""


@dataclass(frozen=True)
class XidClass:
    """One row of the table."""

    code: int
    meaning: str
    category: str
    """application | hardware | degrading."""
    action: Action


# The seeds' table (000_*.txt): 13/31/43 are almost always the application; 48/64/74/79/94/119 are
# the card, its links or its firmware; 63/92 are a card wearing out (one event is a ticket, a
# rate is a replacement). A wrong "application" call costs one restart; a wrong "hardware" call
# costs a device, so only codes the field agrees on exclude.
TABLE: dict[int, XidClass] = {c.code: c for c in [
    XidClass(13, "Graphics Engine Exception (illegal address, usually the application)", "application", Action.RESTART),
    XidClass(31, "GPU memory page fault (application bug or driver)", "application", Action.RESTART),
    XidClass(43, "GPU stopped processing (application-side, GPU is fine)", "application", Action.RESTART),
    XidClass(48, "Double-bit ECC error (memory cell gone, retire the GPU)", "hardware", Action.EXCLUDE),
    XidClass(63, "ECC page retirement / row remapping pending (degrading)", "degrading", Action.ALERT),
    XidClass(64, "Row remapping failure (out of spare rows)", "hardware", Action.EXCLUDE),
    XidClass(74, "NVLink error (cable, riser or board)", "hardware", Action.EXCLUDE),
    XidClass(79, "GPU has fallen off the bus (power, PCIe, riser, thermal)", "hardware", Action.EXCLUDE),
    XidClass(92, "High single-bit ECC error rate (degrading)", "degrading", Action.ALERT),
    XidClass(94, "Contained ECC error (workload killed, GPU keeps running)", "hardware", Action.EXCLUDE),
    XidClass(119, "GSP RPC timeout (driver/firmware, often cleared by a reboot)", "hardware", Action.EXCLUDE),
]}


def classify(code: int) -> XidClass:
    """The table row for ``code``; unknown codes are reported and ignored."""
    return TABLE.get(code, XidClass(code, f"XID {code} (not in the policy table)", "unknown", Action.IGNORE))


@dataclass(frozen=True)
class Decision:
    """What the policy decided for one XID on one device."""

    code: int
    device: int
    category: str
    meaning: str
    action: Action
    repeats: int
    """Events of this code on this device inside the window, this one included."""


@dataclass
class Policy:
    """Classifies XIDs and escalates repeated degrading codes (63/92) from alert to checkpoint (and, if set, exclude).

    ``clock`` is injectable so tests of the rate logic never sleep.
    """

    degrading_count: int = 3
    """This many 63/92 events on one device within ``window_s`` mean the card is degrading: alert + checkpoint now."""
    window_s: float = 3600.0
    """The window the degrading rate is counted over."""
    exclude_after: int | None = None
    """Optionally, this many 63/92 events within the window exclude the device (None: never mid-run; replace it later)."""
    clock: Callable[[], float] = time.monotonic
    _seen: dict[tuple[int, int], deque] = field(default_factory=lambda: defaultdict(deque), repr=False)

    def __post_init__(self) -> None:
        if self.degrading_count < 1:
            raise ValueError("degrading_count must be at least 1")
        if self.exclude_after is not None and self.exclude_after < self.degrading_count:
            raise ValueError("exclude_after must be >= degrading_count (a card is degrading before it is excluded)")

    def decide(self, code: int, device: int) -> Decision:
        row = classify(code)
        now = self.clock()
        seen = self._seen[(device, code)]
        seen.append(now)
        while seen and now - seen[0] > self.window_s:
            seen.popleft()
        action = row.action
        if row.category == "degrading":
            if self.exclude_after is not None and len(seen) >= self.exclude_after:
                action = Action.EXCLUDE
            elif len(seen) >= self.degrading_count:
                action = Action.CHECKPOINT
        return Decision(code, device, row.category, row.meaning, action, len(seen))
