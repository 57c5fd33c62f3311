"""``completes``: the job exited 0, reached its target step, within the restart bound, before the timeout."""

from __future__ import annotations

import re

from pydantic import Field

from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome


class CompletesConfig(CheckConfig):
    max_restarts: int | None = Field(default=None, ge=0)
    """At most this many restarts (attempts after the first); unset: any number torchrun allowed."""
    min_restarts: int = Field(default=0, ge=0)
    """At least this many restarts: an experiment whose point is a restart proves nothing when none happened."""
    min_step: int | None = Field(default=None, ge=1)
    """The step training must reach; default the workload's 'steps' argument when it has one."""


class Completes(Check, kind="completes"):
    """The job exited 0, reached its target step, within the restart bound, before the timeout."""

    Config = CompletesConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        c = self.config
        h = outcome.history
        # An attempt counts once any of its workers was spawned, even if none of them ever sent
        # `start` (died in rendezvous/init): those restarts were spent all the same.
        attempts = h.all_attempts()
        restarts = max(0, len(attempts) - 1)
        target = c.min_step or _int(outcome.experiment.workload.args.get("steps"))
        # The step the job ended at is the final attempt's, not the highest any attempt reached: a
        # job that rolled back from step 60 to 40 and stopped there did not complete.
        final = h.final_attempt() or (attempts[-1] if attempts else None)
        max_step = h.end_step(final) if final is not None else 0
        figures = {"exit_code": outcome.exit_code, "restarts": restarts, "max_step": max_step,
                   "target_step": target, "wall_s": round(outcome.wall_s, 2), "attempts": attempts}
        if outcome.diagnostics:
            return self.failed(outcome.diagnostics[0], **figures)
        if outcome.timed_out:
            return self.failed(f"timed out after {outcome.experiment.timeout_s:g} s at step {max_step}"
                               + (f" of {target}" if target else ""), **figures)
        if outcome.exit_code != 0:
            return self.failed(f"workload exited {outcome.exit_code} at step {max_step} after "
                               f"{restarts} restart(s); {telling_line(outcome.output_tail)[:200]}", **figures)
        if target and max_step < target:
            return self.failed(f"exited 0 but reached step {max_step}, not {target}", **figures)
        if restarts < c.min_restarts:
            return self.failed(f"{restarts} restart(s), fewer than the {c.min_restarts} this experiment exists to "
                               f"exercise: the fault did not cause the recovery it was meant to test", **figures)
        if c.max_restarts is not None and restarts > c.max_restarts:
            return self.failed(f"needed {restarts} restarts, more than the allowed {c.max_restarts}", **figures)
        if not target:
            return self.inconclusive(f"exited 0 at step {max_step}, but the target step is unknown: set "
                                     f"completes.min_step or give the workload a 'steps' argument", **figures)
        return self.passed(f"exit 0 at step {max_step} after {restarts} restart(s) in {outcome.wall_s:.1f} s",
                           **figures)


def _int(value: object) -> int | None:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


_ERROR_LINE = re.compile(r"^(?:\[rank\d+\]:\s*)?([A-Za-z_][\w.]*(?:Error|Exception|Interrupt)\b.*)$")


def telling_line(output: str) -> str:
    """What a reader needs from the output's end: the last exception line a worker printed (torchrun's
    summary ends in a row of '='), else the last line that is not a separator."""
    lines = [line.strip() for line in output.strip().splitlines() if line.strip()]
    errors = [(line.startswith("[rank"), _ERROR_LINE.match(line)) for line in lines]
    # A worker's own exception says why; torchrun's ChildFailedError only says that a worker failed.
    for from_worker in (True, False):
        found = [m.group(1) for w, m in errors if m and (w or not from_worker)]
        if found:
            return f"last error: {found[-1]}"
    text = [line for line in lines if line.strip("=-*_ ")]
    return f"last output: {text[-1] if text else ''}"
