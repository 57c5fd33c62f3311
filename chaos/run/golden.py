"""The fault-free reference run of a workload config, run once and cached by the config's hash."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from filelock import FileLock

from chaos.errors import HarnessError
from chaos.spec.experiment import Experiment
from chaos.evidence.finals import summarize_golden
from chaos.sdk import DIGEST_VERSION

SUMMARY_VERSION = 4
"""Part of the cache file's name: a summary cached before the shape last changed (v2 added the
per-epoch sample order, v3 each committed checkpoint's digest, v4 that digest over every file the value scan
can read: a DCP save in a subfolder, a ``checkpoint.pth.tar``, which the v3 scan passed over and a v4 digest of the
same state covers) is not read, the golden run is redone once instead. A cached summary is
read only if its ``digest_version`` is the SDK's ``DIGEST_VERSION`` too (a change of the digest
scheme changes every digest of the same state): one without it, or with another, is run again."""


def cache_dir() -> Path:
    base = os.environ.get("CHAOS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "chaos")
    return Path(base) / "golden"


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
            cached = self._read(path, key)
            if cached is not None:
                return cached
            path.unlink(missing_ok=True)
            return self._store(path, key, self._run())

    def cached(self) -> dict[str, Any] | None:
        """The cached golden summary of this workload, or None; runs nothing."""
        key = self.experiment.workload_hash()
        path = cache_dir() / f"{key}-v{SUMMARY_VERSION}.json"
        return self._read(path, key) if path.exists() else None

    @staticmethod
    def _read(path: Path, key: str) -> dict[str, Any] | None:
        try:
            cached = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            return None
        # A golden whose digests were taken under another digest scheme (chaos.sdk.digest_state)
        # would fail every correct run's digest comparison: it is run again instead.
        # So would one cached under another key (a hand-copied cache, a truncated hash that collided).
        if isinstance(cached, dict) and cached.get("digest_version") == DIGEST_VERSION \
                and cached.get("config_hash") == key:
            return cached
        return None

    @staticmethod
    def _store(path: Path, key: str, summary: dict[str, Any]) -> dict[str, Any]:
        summary["config_hash"] = key  # the key it is filed under, read back and compared above
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(summary, indent=1))
        os.replace(tmp, path)
        return summary

    def adopt(self, report: Any) -> dict[str, Any]:
        """File a fault-free run made elsewhere (``chaos assess``'s observation of the job, run exactly as the
        golden run would be: no faults, no checks, this workload as it is) as this workload's golden run, so
        the experiments after it do not run the job once more for it; a HarnessError where it cannot be one."""
        summary = self.summary_of(report)
        key = self.experiment.workload_hash()
        directory = cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / f"{key}-v{SUMMARY_VERSION}.json"
        with FileLock(str(path) + ".lock", timeout=self.experiment.timeout_s * 2):
            self._summary = self._store(path, key, summary)
        return self._summary

    def _run(self) -> dict[str, Any]:
        from chaos.gameday.stop import StopRules
        from chaos.run.runner import Runner

        exp = copy.copy(self.experiment)
        exp.name = f"{self.experiment.name}-golden"
        exp.faults = []
        exp.checks = []
        exp.workload = self.experiment.workload.model_copy(
            update={"ckpt_dir": None, "args": self.experiment.workload.golden_args(), "golden_omits": []})
        # A game day's golden run keeps the day's stop rules (no progress for too long ends it), as the run does.
        rules = {"stop_rule": StopRules(exp.gameday.stop)} if exp.gameday is not None else {}
        # Never gated (a baseline leaves golden runs out): no host-speed probe.
        # Every commit scanned (chaos.checkpoint.values): its digest per step is what no_corrupt_commit compares
        # a deterministic run's checkpoints with.
        return self.summary_of(Runner(exp, runs_root=self.runs_root, probe_host=False, scan_values=True, **rules).run())

    @staticmethod
    def summary_of(report: Any) -> dict[str, Any]:
        """The golden summary of a finished fault-free run, or a HarnessError saying why it cannot be one."""
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
