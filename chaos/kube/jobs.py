"""What a batch/v1 Job's status says, as the run reads it: its exit code and its own account of its pods."""

from __future__ import annotations

from typing import Any


def job_code(status: Any) -> int | None:
    """A Job's exit code as the run sees it: 0 once it succeeded, 1 once the controller gave it up (its Failed
    condition: backoffLimit used up), None while it runs (a failed pod it will replace included)."""
    if (status.succeeded or 0) >= 1:
        return 0
    if any(c.type == "Failed" and c.status == "True" for c in (status.conditions or [])):
        return 1
    return None


def job_state(status: Any) -> dict[str, Any]:
    """What a Job says of its pods: running, failed (counted against backoffLimit), succeeded, and why it gave up."""
    gave_up = next((c.reason or "Failed" for c in (status.conditions or []) if c.type == "Failed" and c.status == "True"),
                   None)
    return {"active": status.active or 0, "failed": status.failed or 0, "succeeded": status.succeeded or 0,
            "gave_up": gave_up}
