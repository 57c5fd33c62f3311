"""When a game day ends before its workload does: no progress for too long, or too many restarts."""

from __future__ import annotations

from chaos.spec.gameday import StopConfig


class StopRules:
    """Fed the run's progress at every poll; names the first rule broken, with the figures that broke it."""

    def __init__(self, config: StopConfig) -> None:
        self.config = config
        self._best = 0
        self._since = 0.0

    def __call__(self, now: float, max_step: int, attempts: int) -> str | None:
        if max_step > self._best:
            self._best, self._since = max_step, now
        idle = now - self._since
        if self.config.no_progress_s is not None and idle > self.config.no_progress_s:
            where = f"step {self._best} at {self._since:.0f} s" if self._best else "no step at all"
            return (f"no progress for {idle:.0f} s (limit no_progress_s {self.config.no_progress_s:g}; last new step: "
                    f"{where})")
        restarts = attempts - 1
        if self.config.max_restarts is not None and restarts > self.config.max_restarts:
            return f"{restarts} restarts (limit max_restarts {self.config.max_restarts})"
        return None
