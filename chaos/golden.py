"""The fault-free reference run of a workload config, run once and cached by the config's hash."""

from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path
from typing import Any

from filelock import FileLock

from chaos.errors import HarnessError
from chaos.experiment import Experiment
from chaos.lineage import LineageError, rebuild_lineage
from chaos.records import attempt_key
from chaos.sdk import DIGEST_VERSION

SUMMARY_VERSION = 2
"""Part of the cache file's name: a summary cached before the shape last changed (v2 added the
per-epoch sample order) is not read, the golden run is redone once instead. A cached summary is
read only if its ``digest_version`` is the SDK's ``DIGEST_VERSION`` too (a change of the digest
scheme changes every digest of the same state): one without it, or with another, is run again."""


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
    last_step = history.end_step(attempt) if attempt is not None else 0
    # The last step's losses: the final attempt's own, or (when it only loaded its last checkpoint and
    # trained nothing) those of the latest attempt that ran that step.
    at_last = [r for r in history.of("step") if r.get("step") == last_step and r.source != "output"]
    latest = max((str(r.get("attempt")) for r in at_last), key=attempt_key, default=None)
    at_last = [r for r in at_last if str(r.get("attempt")) == latest]
    final_loss, problem = _loss_at(at_last, last_step)
    # The world size the job ended with: the final attempt's, not the largest any attempt had.
    world = max((int(r.get("world_size", 1)) for r in finals if str(r.get("attempt")) == attempt), default=0)
    return {"ranks": per_rank, "world_size": world, "final_step": last_step, "final_loss": final_loss,
            "final_loss_problem": problem}


def finite_number(value: Any) -> bool:
    """A real, finite number: not NaN or infinite, not null, not a bool or a string."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _loss_at(steps: list[Any], step: int) -> tuple[float | None, str | None]:
    """The mean loss of a step's records, and what is wrong with it: a non-finite or non-numeric value
    (a diverged run; a NaN a strict encoder wrote as null) is named, never averaged or compared.
    A step that reports no loss at all has none (None, None)."""
    reported = [(r.get("rank"), r.get("loss")) for r in steps if "loss" in r]
    bad = [(rank, loss) for rank, loss in reported if not finite_number(loss)]
    if bad:
        listing = ", ".join(f"rank {rank}: {'null' if loss is None else repr(loss)}" for rank, loss in bad[:4])
        return None, f"the loss of step {step} is not a finite number ({listing})"
    if not reported:
        return None, None
    return sum(float(loss) for _, loss in reported) / len(reported), None


def summarize_golden(history: Any) -> dict[str, Any]:
    """The fault-free run's summary: its finals, and the order it consumed the dataset in (for exactly_once)."""
    return {**summarize_finals(history), "dataset_size": history.dataset_size(),
            "epoch_samples": epoch_samples(history)}


def epoch_samples(history: Any) -> dict[str, list[list[int]]] | None:
    """Per epoch (keys are JSON strings), each kept step's global sample set (union over ranks), in step order.

    What exactly_once compares a faulted run's per-epoch consumption with. None when the run's
    steps do not all say which samples they consumed.
    """
    try:
        kept = [r for _, r in rebuild_lineage(history).kept_steps() if r.get("source") != "output"]
    except LineageError:
        return None
    if not kept or any(not isinstance(r.get("samples"), list) for r in kept):
        return None
    steps: dict[int, tuple[int, set[int]]] = {}
    for r in kept:
        epoch, union = steps.setdefault(int(r["step"]), (int(r.get("epoch", 0)), set()))
        union.update(int(i) for i in r["samples"])
    out: dict[str, list[list[int]]] = {}
    for step in sorted(steps):
        epoch, union = steps[step]
        out.setdefault(str(epoch), []).append(sorted(union))
    return out


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
        path = directory / f"{key}-v{SUMMARY_VERSION}.json"
        # Parallel runs (pytest -n) of experiments sharing a workload wait for one golden run.
        with FileLock(str(path) + ".lock", timeout=self.experiment.timeout_s * 2):
            if path.exists():
                try:
                    cached = json.loads(path.read_text())
                except json.JSONDecodeError:
                    cached = None
                # A golden whose digests were taken under another digest scheme (chaos.sdk.digest_state)
                # would fail every correct run's digest comparison: it is run again instead.
                # So would one cached under another key (a hand-copied cache, a truncated hash that collided).
                if isinstance(cached, dict) and cached.get("digest_version") == DIGEST_VERSION \
                        and cached.get("config_hash") == key:
                    return cached
                path.unlink()
            summary = self._run()
            summary["config_hash"] = key  # the key it is filed under, read back and compared above
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
        exp.workload = self.experiment.workload.model_copy(
            update={"ckpt_dir": None, "args": self.experiment.workload.golden_args(), "golden_omits": []})
        report = Runner(exp, runs_root=self.runs_root).run()
        o = report.outcome
        if o.exit_code != 0 or not o.history.finals():
            raise HarnessError(
                f"the fault-free golden run failed (exit {o.exit_code}, timed out: {o.timed_out}); "
                f"see {report.run_dir}/output.log — the workload does not complete even without faults")
        attempts = o.history.all_attempts()
        if len(attempts) > 1:
            # A restart inside the reference run means its end state is a recovery's, not the training's.
            raise HarnessError(
                f"the fault-free golden run restarted ({len(attempts)} attempts, exit {o.exit_code}); see "
                f"{report.run_dir}/output.log — a reference must be one clean attempt: fix what fails without faults")
        summary = summarize_golden(o.history)
        summary["run_dir"] = str(report.run_dir)
        summary["digest_version"] = DIGEST_VERSION
        return summary
