"""``checkpoint_integrity``: what is on disk verifies, corrupted checkpoints were rejected, no commit was lost.

The harness judges the checkpoint directory itself (``chaos.checkpoint.verify``), never the
workload's own opinion of it, and reads the ``ckpt_*`` events only to know what was claimed:

1. every entry on disk that claims to be committed (a ``MANIFEST.json`` or DCP ``.metadata``, a
   single checkpoint file, or a path announced by ``ckpt_commit`` that still exists) verifies;
2. every checkpoint the harness corrupted (corrupt-checkpoint faults) was never loaded afterwards
   (unless re-committed first), and was rejected (``ckpt_reject``) whenever a resume had to pass
   over it to reach an older one;
3. ``latest``, when the workload keeps one, names a valid checkpoint;
4. no resume went back further than the newest committed checkpoint the harness did not corrupt
   (a save that purged or overwrote a good checkpoint before its replacement was durable);
5. after a failed save (``ckpt_error``) the failed path is never loaded, and the previous good
   checkpoint still exists until a later save commits.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos.checkpoint.manifest import LATEST_NAME
from chaos.checkpoint.verify import STEP_ENTRY, Report, UnusableInput, claims_committed, resolve_latest, verify
from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome
from chaos.events import Record


class CheckpointIntegrityConfig(CheckConfig):
    load: bool | None = None
    """Also load every checkpoint into memory; default only where no manifest checksums prove the bytes."""
    require_checkpoint: bool = True
    """Fail when the run committed no checkpoint at all; false: say INCONCLUSIVE instead (nothing to judge is never a pass)."""


@dataclass
class _Corruption:
    path: str
    mode: str
    t: float
    label: str


class CheckpointIntegrity(Check, kind="checkpoint_integrity"):
    """What is on disk verifies, corrupted checkpoints were rejected and never loaded, no committed checkpoint was lost."""

    Config = CheckpointIntegrityConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        root = Path(outcome.ckpt_dir)
        h = outcome.history
        commits = h.of("ckpt_commit")
        loads = _first_per_attempt(h.of("ckpt_load"))
        rejects = h.of("ckpt_reject")
        errors = h.of("ckpt_error")
        corruptions = _corruptions(outcome)
        failures: list[str] = []
        notes: list[str] = []

        disk_failures: list[str] = []
        reports = self._verify_disk(root, commits, corruptions, disk_failures, notes)
        # 'latest' first: when it names a torn checkpoint, that is the headline, not the torn file itself.
        self._judge_latest(root, reports, failures)
        failures += disk_failures
        tested = self._judge_corruptions(corruptions, commits, loads, rejects, failures)
        self._judge_lost_commits(commits, loads, corruptions, failures)
        self._judge_failed_saves(errors, commits, loads, failures)

        figures: dict[str, Any] = {
            "verified": {Path(p).name: r.ok for p, r in reports.items()},
            "commits": len(commits), "loads": [(r.get("attempt"), r.get("step")) for r in loads],
            "rejects": len(rejects), "save_errors": len(errors),
            "corrupted": [c.path for c in corruptions], "corruptions_tested": tested,
        }
        if failures:
            more = f" (+{len(failures) - 1} more: {'; '.join(failures[1:3])})" if len(failures) > 1 else ""
            return self.failed(failures[0] + more, failures=failures, notes=notes, **figures)
        if not commits and not reports:
            if self.config.require_checkpoint:
                return self.failed(f"no checkpoint was committed in {root} (no ckpt_commit, nothing on disk)",
                                   **figures)
            return self.inconclusive(f"no checkpoint was written in {root}: nothing to judge; point the workload's "
                                     f"checkpoints at CHAOS_CKPT_DIR (or workload.ckpt_dir at its own folder), "
                                     f"or drop this check for runs too short to save", **figures)
        valid = sum(r.ok for r in reports.values())
        reason = f"{valid} checkpoint(s) on disk verify"
        if corruptions:
            reason += (f"; {len(corruptions)} corrupted one(s) never loaded"
                       + (f", {tested} put to the test by a resume" if tested else ", none put to the test by a resume"))
        if errors:
            reason += f"; {len(errors)} failed save(s) left the previous checkpoint intact"
        return self.passed(reason, notes=notes, **figures)

    # ---- 1. the disk ------------------------------------------------------------------------

    def _verify_disk(self, root: Path, commits: list[Record], corruptions: list[_Corruption],
                     failures: list[str], notes: list[str]) -> dict[str, Report]:
        announced = {_norm(r["path"]): r for r in commits if r.get("path")}
        candidates: dict[str, Path] = {}
        if root.is_dir():
            for entry in root.iterdir():
                if STEP_ENTRY.match(entry.name) and claims_committed(entry):
                    candidates[_norm(entry)] = entry
        for path in announced:
            if os.path.exists(path):
                candidates.setdefault(path, Path(path))
        corrupted = {c.path for c in corruptions}
        reports: dict[str, Report] = {}
        for key, entry in sorted(candidates.items()):
            try:
                report = verify(entry, load=self.config.load)
            except UnusableInput as exc:
                report = Report(str(entry), "unknown", problems=[str(exc).removeprefix(f"{entry}: ")])
            reports[key] = report
            if report.ok:
                continue
            if key in corrupted:
                notes.append(f"{entry.name}: corrupted by the harness and left on disk: {report.summary()}")
            elif key in announced:
                step = announced[key].get("step")
                failures.append(f"committed checkpoint {entry.name} (ckpt_commit of step {step}) is torn: "
                                f"{report.summary()}")
            else:
                failures.append(f"checkpoint {entry.name} claims to be committed but is invalid: {report.summary()}")
        return reports

    # ---- 3. latest ----------------------------------------------------------------------------

    def _judge_latest(self, root: Path, reports: dict[str, Report], failures: list[str]) -> None:
        if not (root / LATEST_NAME).exists() and not (root / LATEST_NAME).is_symlink():
            return
        name, problem = resolve_latest(root)
        if problem:
            failures.append(problem)
            return
        target = _norm(root / (name or ""))
        report = reports.get(target)
        if report is None:
            failures.append(f"'{LATEST_NAME}' names {name}, which has no commit record (an unfinished save)")
        elif not report.ok:
            failures.append(f"'{LATEST_NAME}' names {name}, which is invalid: {report.summary()}")

    # ---- 2. deliberate corruption -------------------------------------------------------------

    def _judge_corruptions(self, corruptions: list[_Corruption], commits: list[Record], loads: list[Record],
                           rejects: list[Record], failures: list[str]) -> int:
        tested = 0
        for c in corruptions:
            if c.mode == "break-latest":
                continue  # the pointer is judged by 3 and 4: a resume that trusted it lost steps or crashed
            step = _step_of_path(c.path)
            recommitted = min((r["t"] for r in commits if _norm(r.get("path")) == c.path and r["t"] > c.t),
                              default=float("inf"))
            for load in loads:
                if not c.t < load["t"] < recommitted:
                    continue
                tested += 1
                if _norm(load.get("path")) == c.path:
                    failures.append(f"deliberately corrupted checkpoint {Path(c.path).name} ({c.label}: {c.mode}) "
                                    f"was loaded by attempt {load.get('attempt')} without being rejected")
                    break
                loaded = int(load.get("step") or 0)
                passed_over = step is not None and step > loaded
                rejected = any(_norm(r.get("path")) == c.path and c.t < r["t"] <= load["t"] for r in rejects)
                if passed_over and not rejected:
                    failures.append(f"corrupted checkpoint {Path(c.path).name} ({c.mode}) was skipped without a "
                                    f"ckpt_reject: attempt {load.get('attempt')} resumed from step {loaded} and "
                                    "never said why it passed over it")
                    break
        return tested

    # ---- 4. lost commits ----------------------------------------------------------------------

    def _judge_lost_commits(self, commits: list[Record], loads: list[Record], corruptions: list[_Corruption],
                            failures: list[str]) -> None:
        for load in loads:
            usable = [r for r in commits if r["t"] < load["t"] and not _spoiled(r, corruptions, load["t"], commits)]
            if not usable:
                continue
            newest = max(usable, key=lambda r: int(r.get("step") or 0))
            loaded = int(load.get("step") or 0)
            if int(newest.get("step") or 0) > loaded:
                where = "a fresh start (step 0)" if loaded == 0 else f"step {loaded}"
                gone = "" if os.path.exists(_norm(newest.get("path"))) else ", and it is gone from disk"
                failures.append(f"attempt {load.get('attempt')} resumed from {where}, but step {newest.get('step')} "
                                f"had been committed ({Path(str(newest.get('path'))).name}) and the harness did "
                                f"not corrupt it{gone}: a committed checkpoint was lost")
                return

    # ---- 5. failed saves ----------------------------------------------------------------------

    def _judge_failed_saves(self, errors: list[Record], commits: list[Record], loads: list[Record],
                            failures: list[str]) -> None:
        for err in errors:
            path = _norm(err.get("path"))
            recommit = min((r["t"] for r in commits if _norm(r.get("path")) == path and r["t"] > err["t"]),
                           default=float("inf"))
            bad = next((ld for ld in loads if err["t"] < ld["t"] < recommit and _norm(ld.get("path")) == path), None)
            if bad is not None:
                failures.append(f"the failed save of step {err.get('step')} ({err.get('error', '')[:80]}) was "
                                f"loaded by attempt {bad.get('attempt')}")
                continue
            before = [r for r in commits if r["t"] < err["t"] and _norm(r.get("path")) != path]
            later = any(r["t"] > err["t"] for r in commits)
            if before and not later:
                prev = max(before, key=lambda r: r["t"])
                if not os.path.exists(_norm(prev.get("path"))):
                    failures.append(f"the failed save of step {err.get('step')} destroyed the previous good "
                                    f"checkpoint {Path(str(prev.get('path'))).name} (gone from disk, nothing "
                                    "committed since)")


def _corruptions(outcome: RunOutcome) -> list[_Corruption]:
    out = []
    for rec in outcome.faults:
        if rec.kind != "corrupt-checkpoint" or rec.error or not rec.details.get("path"):
            continue
        out.append(_Corruption(_norm(rec.details["path"]), str(rec.details.get("mode", "")), rec.t_inject, rec.label))
    return out


def _spoiled(commit: Record, corruptions: list[_Corruption], before: float, commits: list[Record]) -> bool:
    """Was this commit's checkpoint corrupted by the harness (and not re-committed) before ``before``?"""
    path = _norm(commit.get("path"))
    for c in corruptions:
        if c.path == path and commit["t"] < c.t < before:
            if not any(_norm(r.get("path")) == path and c.t < r["t"] < before for r in commits):
                return True
    return False


def _first_per_attempt(loads: list[Record]) -> list[Record]:
    """One ``ckpt_load`` per attempt (every rank reports the same one): the earliest."""
    seen: dict[str, Record] = {}
    for r in loads:
        seen.setdefault(str(r.get("attempt")), r)
    return sorted(seen.values(), key=lambda r: r["t"])


def _step_of_path(path: str) -> int | None:
    match = STEP_ENTRY.match(Path(path).name)
    return int(match.group(1)) if match else None


def _norm(path: Any) -> str:
    return os.path.realpath(str(path)) if path else ""
