"""``checkpoint_integrity``: what was committed or loaded verifies, corrupted ones were rejected, no commit was lost.

The harness judges checkpoints itself (``chaos.checkpoint.verify``), never by the workload's own
opinion of them, and reads the ``ckpt_*`` events only to know what was claimed. Its evidence is
what is on disk at the end, and the witness's ``ckpt_verify`` records (``chaos.evidence.witness``: each
checkpoint verified when its ``ckpt_commit`` or ``ckpt_load`` was seen, before retention could
prune it). Only the harness's own ``ckpt_verify`` records count: a workload cannot vouch for itself.

1. every entry on disk that claims to be committed (a ``MANIFEST.json`` or DCP ``.metadata``, a
   single checkpoint file, or a path announced by ``ckpt_commit`` that still exists) verifies; a
   committed checkpoint gone by the end is judged by the witness's look at its commit, and one the
   witness found invalid then fails even if deleted since;
2. every load (each rank's report of the same load counted once; every attempt, every in-process
   reload) names a checkpoint some ``ckpt_commit`` announced before it, or one whose save began and
   that the witness verified when the load was seen (a rank killed after making the save durable,
   before announcing it); and the witness did not find the loaded checkpoint invalid;
3. every checkpoint the harness corrupted (corrupt-checkpoint faults) was never loaded afterwards
   (unless re-committed first), and was rejected (``ckpt_reject``) whenever a resume had to pass
   over it to reach an older one;
4. ``latest``, when the workload keeps one, names a valid checkpoint; with no pointer, the entry the
   stack's own resume rule picks (the highest HF ``checkpoint-N``) is a finished save;
5. no load went back further than the newest committed checkpoint the harness did not corrupt
   (a save that purged or overwrote a good checkpoint before its replacement was durable, or a
   resume rule that passed over a newer checkpoint still on disk, e.g. Lightning's ``last.ckpt``
   written after the step's own file);
6. after a failed save (``ckpt_error``) the failed path is never loaded, and the previous good
   checkpoint still exists until a later save commits.

Missing evidence is INCONCLUSIVE, never a pass: a commit gone from disk that the witness never
verified, a corruption after which no load was reported (a silent load of the damaged checkpoint
looks the same as a rejection) or that no resume followed, and a run in which no committed
checkpoint could be verified intact at all.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from chaos.checkpoint.manifest import LATEST_NAME
from chaos.checkpoint.verify import (STEP_ENTRY, Report, UnusableInput, claims_committed, resolve_latest,
                                    selection_hazards, verify)
from chaos.checks.base import Check, CheckConfig, CheckResult, RunOutcome
from chaos.checks.base import norm_path as _norm
from chaos.checks._saves import (CHECKPOINT_SUFFIXES, _announced, _attempt_starts, _checkpoints_elsewhere, _Corruption,
                                 _corruptions, _Load, _loads, _look, _problems, _spoiled, _step_of_path,
                                 _unproven_load, _unrepaired)
from chaos.evidence.harness_records import CkptVerify, WitnessIncomplete
from chaos.evidence.records import CkptBegin, CkptCommit, CkptError, CkptReject


class CheckpointIntegrityConfig(CheckConfig):
    load: bool | None = None
    """Also load every checkpoint into memory; default only where no manifest checksums prove the bytes."""
    require_checkpoint: bool = True
    """Fail when the run committed no checkpoint at all; false: say INCONCLUSIVE instead (nothing to judge is never a pass)."""


class CheckpointIntegrity(Check, kind="checkpoint_integrity"):
    """What was committed or loaded verifies; corrupted checkpoints were rejected, never loaded; no commit was lost."""

    Config = CheckpointIntegrityConfig

    def evaluate(self, outcome: RunOutcome) -> CheckResult:
        root = Path(outcome.ckpt_dir)
        h = outcome.history
        commits = h.of("ckpt_commit")
        loads = _loads(h.of("ckpt_load"))
        rejects = h.of("ckpt_reject")
        errors = h.of("ckpt_error")
        looks = h.harness(CkptVerify)
        corruptions = _corruptions(outcome)
        failures: list[str] = []
        unproven: list[str] = []
        notes: list[str] = []

        disk_failures: list[str] = []
        reports = self._verify_disk(root, commits + h.of("ckpt_begin"), corruptions, disk_failures, notes)
        # 'latest' first: when it names a torn checkpoint, that is the headline, not the torn file itself.
        self._judge_latest(root, reports, failures)
        failures += disk_failures
        verified = self._judge_commit_looks(commits, reports, looks, corruptions, failures, unproven, notes)
        tested = self._judge_corruptions(corruptions, commits, loads, rejects, _attempt_starts(h), failures, unproven)
        self._judge_loads(loads, commits, h.of("ckpt_begin"), looks, corruptions, failures, notes,
                          reports=reports, unproven=unproven, incomplete=h.harness(WitnessIncomplete))
        self._judge_lost_commits(commits, loads, corruptions, failures)
        self._judge_failed_saves(errors, commits, loads, failures)

        pruned = sorted(Path(k).name for k in verified if k not in reports)
        figures: dict[str, Any] = {
            "verified": {Path(p).name: r.ok for p, r in reports.items()}, "verified_when_committed": pruned,
            "commits": len(commits), "loads": [(ld.attempt, ld.step) for ld in loads],
            "rejects": len(rejects), "save_errors": len(errors),
            "corrupted": [c.path for c in corruptions], "corruptions_tested": tested,
        }
        if failures:
            return self.failed(_headline(failures), failures=failures, notes=notes, **figures)
        if not commits and not reports:
            elsewhere = _checkpoints_elsewhere(outcome, root)
            looked = (f"in {root} (where this check looked: the run's checkpoint directory, CHAOS_CKPT_DIR, "
                      f"and every path a ckpt_commit named)")
            hint = (f"; the workload wrote {', '.join(elsewhere)} in its working directory: set workload.ckpt_dir "
                    f"to that directory (with workload.cwd \"{{run_dir}}/work\", ckpt_dir \"{{run_dir}}/work\")"
                    if elsewhere else "")
            if self.config.require_checkpoint:
                return self.failed(f"no checkpoint was committed {looked}: no ckpt_commit, nothing on disk{hint}",
                                   looked_in=str(root), **figures)
            return self.inconclusive(f"no checkpoint was written {looked}: nothing to judge; point the workload's "
                                     f"checkpoints at CHAOS_CKPT_DIR (or workload.ckpt_dir at its own folder), "
                                     f"or drop this check for runs too short to save{hint}", looked_in=str(root),
                                     **figures)
        if unproven:
            return self.inconclusive(_headline(unproven), unproven=unproven, notes=notes, **figures)
        valid = sum(r.ok for r in reports.values())
        if not valid and not verified:
            return self.inconclusive(f"no checkpoint was verified intact: {len(commits)} commit(s) announced, none "
                                     f"valid on disk in {root}, none verified by the harness when committed; give "
                                     "ckpt_commit the checkpoint's path and run under the chaos runner, whose "
                                     "witness verifies each commit as it is announced", notes=notes, **figures)
        reason = f"{valid} checkpoint(s) on disk verify"
        if pruned:
            reason += f", {len(pruned)} more verified by the harness when committed (gone since)"
        if corruptions:
            reason += f"; {len(corruptions)} corrupted one(s) never loaded" + (
                f", {tested} put to the test by a resume" if tested else "")
        if errors:
            reason += f"; {len(errors)} failed save(s) left the previous checkpoint intact"
        return self.passed(reason, notes=notes, **figures)

    # ---- 1. the disk, and each commit as the witness saw it ----------------------------------

    def _verify_disk(self, root: Path, saves: list[CkptCommit | CkptBegin], corruptions: list[_Corruption],
                     failures: list[str], notes: list[str]) -> dict[str, Report]:
        announced = {_norm(r.path): r for r in saves if r.path and isinstance(r, CkptCommit)}
        candidates: dict[str, Path] = {}
        # The run's checkpoint directory, and each directory a save was announced in: a stack may keep its
        # checkpoints below the one it was given (Accelerate's project_dir/checkpoints/checkpoint_N).
        roots = [root] + sorted({Path(p).parent for r in saves if (p := _norm(r.path))} - {Path(_norm(root))})
        for where in roots:
            if not where.is_dir():
                continue
            for entry in where.iterdir():
                # step_N entries (the protocol's layout), and single checkpoint files of any name: a
                # script that does not speak the protocol saves e.g. snapshot.pt.
                if (STEP_ENTRY.match(entry.name) and claims_committed(entry)) or (
                        entry.is_file() and entry.suffix in CHECKPOINT_SUFFIXES):
                    candidates[_norm(entry)] = entry
            # A torn save the stack's own resume rule would pick is a failure of the checkpoints even
            # though nothing claims it committed: the next resume from this directory fails.
            failures += selection_hazards(where)
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
                step = announced[key].step
                failures.append(f"committed checkpoint {entry.name} (ckpt_commit of step {step}) is torn: "
                                f"{report.summary()}")
            else:
                failures.append(f"checkpoint {entry.name} claims to be committed but is invalid: {report.summary()}")
        return reports

    def _judge_commit_looks(self, commits: list[CkptCommit], reports: dict[str, Report], looks: list[CkptVerify],
                            corruptions: list[_Corruption], failures: list[str], unproven: list[str],
                            notes: list[str]) -> set[str]:
        """Paths the witness verified intact when committed; judges every commit the disk cannot vouch for."""
        verified: set[str] = set()
        unverified: dict[str, str] = {}
        for commit in commits:
            key = _norm(commit.path)
            if not key:
                continue
            name, step = Path(key).name, commit.step
            look = _look(looks, "ckpt_commit", key, str(commit.attempt), frozenset({commit.t}))
            report = reports.get(key)
            if look is not None and look.ok is True:
                verified.add(key)
                continue
            if look is not None and look.ok is False:
                # The witness looks in the background; a fault fired by the same commit may have got there first.
                race = next((c for c in corruptions if c.path == key and commit.t <= c.t <= look.t), None)
                if race is not None:
                    notes.append(f"{name}: the harness's look at its commit overlapped {race.label} corrupting it, "
                                 "so it says nothing about the save")
                elif report is None or report.ok:  # on disk and invalid: the disk verdict already names it
                    gone = "" if report is not None else " (gone from disk since)"
                    failures.append(f"committed checkpoint {name} (ckpt_commit of step {step}) was invalid when the "
                                    f"harness verified it at commit time{gone}: {_problems(look)}")
                continue
            if report is not None:
                continue
            if any(c.path == key and c.t > commit.t for c in corruptions):
                notes.append(f"{name}: gone from disk after the harness corrupted it, never verified intact")
                continue
            unverified.setdefault(key, f"{name} (step {step}" + (f": {_problems(look)})" if look else ")"))
        if unverified:
            listing = ", ".join(list(unverified.values())[:3]) + (
                f" (+{len(unverified) - 3} more)" if len(unverified) > 3 else "")
            unproven.append(f"{len(unverified)} committed checkpoint(s) are gone from disk and were never verified by "
                            f"the harness, so whether they were intact is unknown: {listing}; run under the chaos "
                            "runner, whose witness verifies each commit as it is announced, or keep them to the end")
        return verified

    # ---- 2. every load ------------------------------------------------------------------------

    def _judge_loads(self, loads: list[_Load], commits: list[CkptCommit], begins: list[CkptBegin],
                     looks: list[CkptVerify], corruptions: list[_Corruption], failures: list[str], notes: list[str], *,
                     reports: dict[str, Report], unproven: list[str], incomplete: list[WitnessIncomplete]) -> None:
        for load in loads:
            if not load.step and not load.path:
                continue
            if any(c.path == load.key and _unrepaired(c, load.t, commits) for c in corruptions):
                continue  # loading what the harness corrupted is judged by 3, in its own words
            look = _look(looks, "ckpt_load", load.key, load.attempt, load.times) if load.path else None
            if load.step and not _announced(commits, load):
                if not _announced(begins, load):
                    failures.append(f"{load.who} loaded {load.name} (step {load.step}), which no ckpt_commit "
                                    "announced before the load")
                elif look is not None and look.ok is True:
                    notes.append(f"{load.who} loaded {load.name} (step {load.step}), whose save began but never "
                                 "announced a commit; the harness verified it when the load was seen (a save made "
                                 "durable by a rank killed before ckpt_commit)")
                else:
                    failures.append(f"{load.who} loaded {load.name} (step {load.step}), whose save began but no "
                                    f"ckpt_commit announced before the load, {_unproven_load(look)}")
                continue
            if look is None or look.ok is None:
                # What was loaded was never seen whole: no look when the load was seen (the witness's
                # child died or hit its time limit) and nothing on disk at the end to verify instead.
                if load.path and load.step and load.key not in reports:
                    why = _unproven_load(look)
                    if incomplete and look is None:
                        why += (f" (the witness stopped short: {incomplete[-1].answered} of "
                                f"{incomplete[-1].sent} looks answered)")
                    unproven.append(f"{load.who} loaded {load.name} (step {load.step}), which is gone from disk, "
                                    f"{why}: whether it was intact when loaded is unknown")
                continue
            if look.ok is not False:
                continue
            race = next((c for c in corruptions if c.path == load.key and load.t <= c.t <= look.t), None)
            if race is not None:
                notes.append(f"{load.name}: the harness's look at the load by {load.who} overlapped {race.label} "
                             "corrupting it, so it says nothing about what was loaded")
                continue
            failures.append(f"{load.who} loaded {load.name}, which the harness found invalid when the load was seen: "
                            f"{_problems(look)}")

    # ---- 3. deliberate corruption -------------------------------------------------------------

    def _judge_corruptions(self, corruptions: list[_Corruption], commits: list[CkptCommit], loads: list[_Load],
                           rejects: list[CkptReject], starts: dict[str, float], failures: list[str],
                           unproven: list[str]) -> int:
        tested = 0
        for c in corruptions:
            if c.mode == "break-latest":
                continue  # the pointer is judged by 4 and 5: a resume that trusted it lost steps or crashed
            name = Path(c.path).name
            step = _step_of_path(c.path)
            after = [ld for ld in loads if _unrepaired(c, ld.t, commits)]
            if not after:
                if any(_unrepaired(c, t0, commits) for t0 in starts.values()):
                    unproven.append(f"the run never reported which checkpoint it loaded after {c.label} corrupted "
                                    f"{name}; emit ckpt_load(step, path) on resume")
                else:
                    unproven.append(f"{c.label} corrupted {name}, but no resume happened after the corruption, so "
                                    "it was never put to the test; add a kill after it (e.g. kill-rank on the same "
                                    "trigger with a delay_s)")
                continue
            tested += 1
            for load in after:
                if not load.path and load.step and step in (None, load.step):
                    # The load names the corrupted checkpoint's step and no path: it may be that very
                    # checkpoint, loaded without a rejection. Nothing tells it apart from a good copy.
                    unproven.append(f"{load.who} loaded step {load.step} without naming a path after {c.label} "
                                    f"corrupted {name}{'' if step is None else f' (step {step})'}, and rejected nothing: whether it loaded the "
                                    f"corrupted checkpoint cannot be told; emit ckpt_load(step, path)")
                    break
                if load.key == c.path:
                    failures.append(f"deliberately corrupted checkpoint {name} ({c.label}: {c.mode}) "
                                    f"was loaded by {load.who} without being rejected")
                    break
                passed_over = step is not None and step > load.step
                rejected = any(_norm(r.path) == c.path and c.t < r.t <= load.t for r in rejects)
                if passed_over and not rejected:
                    failures.append(f"corrupted checkpoint {name} ({c.mode}) was skipped without a ckpt_reject: "
                                    f"{load.who} resumed from step {load.step} and never said why it passed over it")
                    break
        return tested

    # ---- 4. latest ----------------------------------------------------------------------------

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

    # ---- 5. lost commits ----------------------------------------------------------------------

    def _judge_lost_commits(self, commits: list[CkptCommit], loads: list[_Load], corruptions: list[_Corruption],
                            failures: list[str]) -> None:
        for load in loads:
            usable = [r for r in commits if r.t < load.t and not _spoiled(r, corruptions, load.t, commits)]
            if not usable:
                continue
            newest = max(usable, key=lambda r: int(r.step or 0))
            if int(newest.step or 0) > load.step:
                where = "a fresh start (step 0)" if load.step == 0 else f"step {load.step}"
                path = _norm(newest.path)
                saved_again = any(_norm(r.path) == path and r.t > load.t for r in commits)
                if os.path.exists(path) and not saved_again:
                    # Still there, never rewritten: the stack's resume rule chose an older one.
                    fate = (", and it is still on disk: the resume passed over it, and the steps since "
                            f"step {load.step} were trained again")
                else:
                    fate = ", and it is gone from disk" if not os.path.exists(path) else ""
                    fate += ": a committed checkpoint was lost"
                failures.append(f"{load.who} resumed from {where}, but step {newest.step} had been committed "
                                f"({Path(str(newest.path)).name}) and the harness did not corrupt it{fate}")
                return

    # ---- 6. failed saves ----------------------------------------------------------------------

    def _judge_failed_saves(self, errors: list[CkptError], commits: list[CkptCommit], loads: list[_Load],
                            failures: list[str]) -> None:
        for err in errors:
            path = _norm(err.path)
            recommit = min((r.t for r in commits if _norm(r.path) == path and r.t > err.t), default=float("inf"))
            bad = next((ld for ld in loads if err.t < ld.t < recommit and ld.key == path), None)
            if bad is not None:
                failures.append(f"the failed save of step {err.step} ({(err.error or '')[:80]}) was "
                                f"loaded by {bad.who}")
                continue
            before = [r for r in commits if r.t < err.t and _norm(r.path) != path]
            later = any(r.t > err.t for r in commits)
            if before and not later:
                prev = max(before, key=lambda r: r.t)
                if not os.path.exists(_norm(prev.path)):
                    failures.append(f"the failed save of step {err.step} destroyed the previous good "
                                    f"checkpoint {Path(str(prev.path)).name} (gone from disk, nothing "
                                    "committed since)")


def _headline(findings: list[str]) -> str:
    more = f" (+{len(findings) - 1} more: {'; '.join(findings[1:3])})" if len(findings) > 1 else ""
    return findings[0] + more


