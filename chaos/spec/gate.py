"""A health gate under test: the ``gate`` section of an experiment file, which makes it a coverage plan.

Teams run a health check before an expensive launch and at every restart (a one-step dry run, an
all-reduce against a baseline, a storage round trip, a scan of the kernel log). Whether the check
catches the faults it is meant to catch is never tested. In a coverage plan the workload *is* the
check (any command; exit 0 means healthy), and ``chaos coverage`` runs it once per listed fault, each
on a fresh target with only that fault, plus healthy runs with none: caught or not, in how long, and
any false alarm. ``chaos.gate`` runs it; this model is what the file says.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from chaos.spec.configs import StrictConfig


class GateConfig(StrictConfig):
    """The file is a coverage plan: the workload is a health gate (exit 0: healthy), run once per fault in
    ``faults`` (each alone, on a fresh target) and ``healthy_runs`` times with no fault."""

    healthy_runs: int = Field(default=1, ge=1, le=100)
    """Runs with no fault: any that does not pass is a false alarm."""
    deadline_s: float | None = Field(default=None, gt=0, le=24 * 3600)
    """The deadline your launch pipeline gives the gate (a Slurm prolog's timeout, an init container's
    activeDeadlineSeconds): a gate still running then is stopped and counts as failed, so under a fault it
    is caught at the deadline and on a healthy run it is a false alarm. Unset: a gate that never answers is
    a miss (nothing stops it, the launch waits), reported as hung."""
    calibrate: list[str] = Field(default_factory=list)
    """Arguments added to the workload's for one healthy run before all others (e.g. ``[--record-baseline]``):
    the gate records what healthy looks like on this target. That run must pass, or nothing else runs.
    ``{gate_dir}`` in the workload's args, command and env is the coverage run's own folder."""
    require_coverage: float | None = Field(default=None, ge=0, le=1)
    """The share of the listed faults the gate must catch (a fault whose injection failed counts as not
    caught: untested is not covered). Unset: no bound."""
    require_caught: list[str] = Field(default_factory=list)
    """Faults (their ``name``, or ``kind#index``) the gate must catch, whatever the share."""
    max_false_alarms: int = Field(default=0, ge=0)
    """How many healthy runs may fail."""

    @model_validator(mode="after")
    def _calibrate_args(self) -> "GateConfig":
        if any(not a for a in self.calibrate):
            raise ValueError("calibrate holds an empty argument")
        return self


def plan_problems(gate: GateConfig, faults: list[Any]) -> list[tuple[tuple[Any, ...], str]]:
    """What the loader refuses in a coverage plan beyond each field's own rule, as (YAML path, message): a label
    twice (each cell of the matrix needs its own), a fault that goes away before the gate answers (the gate is
    judged against it), a required catch that names no fault. ``faults``: the loaded FaultSpecs."""
    out: list[tuple[tuple[Any, ...], str]] = []
    seen: dict[str, int] = {}
    for s in faults:
        name = s.config.name or f"{s.kind}#{s.index}"
        if name in seen:
            out.append((("faults", s.index, "name"), f"'{name}' is also the label of faults[{seen[name]}]: each cell "
                                                     f"of the matrix needs its own name"))
        seen.setdefault(name, s.index)
        if s.config.duration_s is not None:
            out.append((("faults", s.index, "duration_s"), "a coverage plan's fault stays until the gate has answered "
                                                           "(the gate is judged against it): drop duration_s"))
    for i, name in enumerate(gate.require_caught):
        if name not in seen:
            out.append((("gate", "require_caught", i), f"'{name}' names none of the faults "
                                                       f"({', '.join(sorted(seen)) or 'none'})"))
    return out
