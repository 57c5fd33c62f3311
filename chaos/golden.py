"""The fault-free reference run of a workload config, run once and cached by the config's hash."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from filelock import FileLock

from chaos.errors import HarnessError
from chaos.experiment import Experiment


def cache_dir() -> Path:
    base = os.environ.get("CHAOS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "chaos")
    return Path(base) / "golden"


def summarize_finals(history: Any) -> dict[str, Any]:
    """What a golden comparison needs: final digest and step per rank, and the last losses."""
    finals = history.finals()
    attempt = history.final_attempt()
    per_rank = {str(r.get("rank")): {"digest": r.get("digest"), "step": r.get("step")}
                for r in finals if str(r.get("attempt")) == attempt}
    steps = history.of("step", attempt=attempt)
    last_step = max((int(r["step"]) for r in steps), default=0)
    losses = [float(r["loss"]) for r in steps if r.get("step") == last_step and "loss" in r]
    # The world size the job ended with: the final attempt's, not the largest any attempt had.
    world = max((int(r.get("world_size", 1)) for r in finals if str(r.get("attempt")) == attempt), default=0)
    return {"ranks": per_rank, "world_size": world, "final_step": last_step,
            "final_loss": sum(losses) / len(losses) if losses else None}


class Golden:
    """Lazily runs (or reads from cache) the fault-free run of ``experiment``'s workload."""

    def __init__(self, experiment: Experiment, runs_root: Path) -> None:
        self.experiment = experiment
        self.runs_root = runs_root
        self._summary: dict[str, Any] | None = None

    def __call__(self) -> dict[str, Any]:
        if self._summary is None:
            self._summary = self._load_or_run()
        return self._summary

    def _load_or_run(self) -> dict[str, Any]:
        key = self.experiment.workload_hash()
        directory = cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{key}.json"
        # Parallel runs (pytest -n) of experiments sharing a workload wait for one golden run.
        with FileLock(str(path) + ".lock", timeout=self.experiment.timeout_s * 2):
            if path.exists():
                try:
                    return json.loads(path.read_text())
                except json.JSONDecodeError:
                    path.unlink()
            summary = self._run()
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(summary, indent=1))
            os.replace(tmp, path)
            return summary

    def _run(self) -> dict[str, Any]:
        from chaos.runner import Runner

        exp = copy.copy(self.experiment)
        exp.name = f"{self.experiment.name}-golden"
        exp.faults = []
        exp.checks = []
        exp.workload = self.experiment.workload.model_copy(update={"ckpt_dir": None})
        report = Runner(exp, runs_root=self.runs_root).run()
        o = report.outcome
        if o.exit_code != 0 or not o.history.finals():
            raise HarnessError(
                f"the fault-free golden run failed (exit {o.exit_code}, timed out: {o.timed_out}); "
                f"see {report.run_dir}/output.log — the workload does not complete even without faults")
        summary = summarize_finals(o.history)
        summary["run_dir"] = str(report.run_dir)
        summary["config_hash"] = self.experiment.workload_hash()
        return summary
